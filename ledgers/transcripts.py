"""`wake_transcript` and `wake_tool_calls`: a wake's conversation as its model saw it, and every
tool call with its arguments, answer, latency and outcome (docs/ledger.md, "The transcript").

The bodies are in `manifest_contents` under their SHA-256; the records name them. The row's
`transcript_root` is SHA-256 over the records (`root_of`), and a settled row's chain link covers
it, so `wake verify` can recompute every part from the stored content.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from ledgers import queries

OUTCOMES = ("ok", "error", "refused", "not_run", "queued")
ROLES = ("system", "user", "assistant", "tool")

_sql = queries.named("transcripts")


@dataclass(frozen=True, kw_only=True)
class Message:
    """One message as it entered the conversation; its body (canonical JSON) is `sha256`'s."""

    seq: int
    turn: int
    role: str
    sha256: str
    chars: int  # the text's length before the cap
    cut: bool


@dataclass(frozen=True, kw_only=True)
class Call:
    """One tool call the model made, and which message answered it."""

    seq: int
    turn: int
    call_id: str
    tool: str
    arguments_sha256: str
    answer_seq: int
    outcome: str
    latency_ms: float


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def root_of(messages: Sequence[Message], calls: Sequence[Call]) -> str:
    """SHA-256 of the records, as canonical JSON: every field of every message and call, in order."""
    doc = {
        "messages": [[m.seq, m.turn, m.role, m.sha256, m.chars, m.cut] for m in messages],
        "calls": [[c.seq, c.turn, c.call_id, c.tool, c.arguments_sha256, c.answer_seq, c.outcome, c.latency_ms] for c in calls],
    }
    return sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


async def record(
    conn: asyncpg.Connection, wake_id: uuid.UUID, contents: Mapping[str, tuple[str, str]], messages: Sequence[Message],
    calls: Sequence[Call], root: str,
) -> bool:
    """Write new records and their bodies, and set the row's root over all records so far; call
    inside the wake's fenced transaction. False when the row is not open (nothing was written)."""
    keys = sorted(contents)
    return await conn.fetchval(
        _sql("record"), wake_id, keys, [contents[k][0] for k in keys], [contents[k][1] for k in keys],
        [m.seq for m in messages], [m.turn for m in messages], [m.role for m in messages], [m.sha256 for m in messages],
        [m.chars for m in messages], [m.cut for m in messages],
        [c.seq for c in calls], [c.turn for c in calls], [c.call_id for c in calls], [c.tool for c in calls],
        [c.arguments_sha256 for c in calls], [c.answer_seq for c in calls], [c.outcome for c in calls], [c.latency_ms for c in calls],
        root,
    ) is not None


@dataclass(frozen=True, kw_only=True)
class Stored:
    """A wake's transcript as read back: the records and the bodies behind them (None: missing)."""

    messages: list[tuple[Message, str | None, str | None]]  # (record, kind, body)
    calls: list[tuple[Call, str | None, str | None]]

    @property
    def empty(self) -> bool:
        return not self.messages and not self.calls


async def read(conn: asyncpg.Connection, wake_id: uuid.UUID) -> Stored:
    messages = [
        (Message(seq=r["seq"], turn=r["turn"], role=r["role"], sha256=r["sha256"], chars=r["chars"], cut=r["cut"]), r["kind"], r["body"])
        for r in await conn.fetch(_sql("messages"), wake_id)
    ]
    calls = [
        (Call(seq=r["seq"], turn=r["turn"], call_id=r["call_id"], tool=r["tool"], arguments_sha256=r["arguments_sha256"],
              answer_seq=r["answer_seq"], outcome=r["outcome"], latency_ms=r["latency_ms"]), r["kind"], r["body"])
        for r in await conn.fetch(_sql("calls"), wake_id)
    ]
    return Stored(messages=messages, calls=calls)


def _body_problem(what: str, sha: str, kind: str | None, body: str | None, expected_kind: str) -> str | None:
    if body is None:
        return f"{what}: no stored body has its hash {sha}: the hash was changed, or its body removed"
    if sha256(body) != sha:
        return f"{what}: its stored body hashes to {sha256(body)}, the record says {sha}: the body was changed"
    if kind != expected_kind:
        return f"{what}: its stored body is a {kind}, not a {expected_kind}"
    return None


# How a route that calls tools through a JSON schema sends a call's answer back: a user message
# that names the tool (`wake.think.structured.tool_result_message`), there being no native call
# for a `tool` message to answer.
STRUCTURED_ANSWER = "The tool {tool} answered:\n"


def _answer_problem(call: Call, answers: Mapping[int, tuple[str, object]]) -> str | None:
    role, message = answers.get(call.answer_seq, (None, None))
    if role == "user" and isinstance(message, dict) and str(message.get("content") or "").startswith(
        STRUCTURED_ANSWER.format(tool=call.tool or "(none)")
    ):
        return None  # a JSON-schema call's answer
    if role != "tool":
        return f"names message {call.answer_seq} as its answer, which is {'missing' if role is None else 'a ' + role + ' message'}"
    if isinstance(message, dict) and message.get("tool_call_id") != call.call_id:
        return f"its answer (message {call.answer_seq}) answers {message.get('tool_call_id')!r}, not {call.call_id!r}"
    return None


def audit(stored: Stored, row: Mapping[str, object]) -> list[tuple[str, str]]:
    """Every part of the transcript that does not agree: (part, what differs). Recomputes each
    body's hash, checks the order, each call's answer, the row's counts and the root."""
    problems: list[tuple[str, str]] = []
    answers: dict[int, tuple[str, object]] = {}
    for n, (m, kind, body) in enumerate(stored.messages):
        if m.seq != n:
            problems.append((f"transcript message {n}", f"the next stored message is {m.seq}: a message was removed or renumbered"))
            break
        if (problem := _body_problem(f"transcript message {m.seq}", m.sha256, kind, body, "message")) is not None:
            problems.append((f"transcript message {m.seq}", problem.split(": ", 1)[1]))
            continue
        assert body is not None
        answers[m.seq] = (m.role, json.loads(body))
    for n, (c, kind, body) in enumerate(stored.calls):
        part = f"tool call {c.seq} ({c.tool})"
        if c.seq != n:
            problems.append((f"tool call {n}", f"the next stored call is {c.seq}: a call was removed or renumbered"))
            break
        if (problem := _body_problem(part, c.arguments_sha256, kind, body, "arguments")) is not None:
            problems.append((part, problem.split(": ", 1)[1]))
        if (problem := _answer_problem(c, answers)) is not None:
            problems.append((part, problem))
    tried = sum(1 for c, _, _ in stored.calls if c.outcome != "not_run")
    refused = sum(1 for c, _, _ in stored.calls if c.outcome == "refused")
    if not stored.empty and (tried, refused) != (row.get("tool_calls") or 0, row.get("refusals") or 0):
        problems.append(("tool call count", f"the row counts {row.get('tool_calls')} calls ({row.get('refusals')} refused); "
                                            f"the transcript has {tried} ({refused} refused)"))
    recomputed = root_of([m for m, _, _ in stored.messages], [c for c, _, _ in stored.calls]) if not stored.empty else None
    if recomputed != row.get("transcript_root"):
        problems.append(("transcript root", f"the row's transcript root is {row.get('transcript_root')}; its records give {recomputed}"))
    return problems


def shown_messages(stored: Iterable[tuple[Message, str | None]]) -> tuple[list[dict[str, object]], dict[int, str | None]]:
    """Messages with their stored bodies as the transcript views show them, and each one's text by
    seq (what a call's answer reads); a wake's and a replay's transcripts alike."""
    messages: list[dict[str, object]] = []
    texts: dict[int, str | None] = {}
    for m, body in stored:
        decoded: dict[str, Any] = json.loads(body) if body is not None else {}
        texts[m.seq] = decoded.get("content") if body is not None else None
        messages.append({
            "seq": m.seq, "turn": m.turn, "role": m.role, "content": decoded.get("content"),
            **{k: decoded[k] for k in ("tool_calls", "tool_call_id") if k in decoded},
            "chars": m.chars, "cut": m.cut, "sha256": m.sha256, "stored": body is not None,
        })
    return messages, texts


def as_dict(stored: Stored, row: Mapping[str, object]) -> dict[str, object]:
    """The transcript as data (`wake show --transcript --json`, the MCP server): each message with
    its stored body decoded, each call with its arguments and its answer's text. A serialiser of
    JSON whose message keys vary with the role (tool calls, a call id), so a dict, not a record."""
    messages, texts = shown_messages((m, body) for m, _, body in stored.messages)
    calls = [
        {"seq": c.seq, "turn": c.turn, "call_id": c.call_id, "tool": c.tool, "arguments": body, "answer_seq": c.answer_seq,
         "answer": texts.get(c.answer_seq), "outcome": c.outcome, "ok": c.outcome == "ok", "latency_ms": c.latency_ms}
        for c, _, body in stored.calls
    ]
    return {
        "wake_id": str(row["wake_id"]), "agent_id": row["agent_id"], "tier": row["tier"], "status": row["status"],
        "transcript_root": row.get("transcript_root"), "messages": messages, "calls": calls,
    }
