"""A recorded wake as a replay reads it: the blocks in prompt order with their stored texts, the
declarations of the tools it held, and its transcript's calls with their answers.

Everything comes from the ledger (`wake_introspection_ledger`, `manifest_contents`,
`wake_transcript`, `wake_tool_calls`); a block or declaration whose text is not stored cannot be
replayed, and says so (`Unreplayable`, exit 65).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from ledgers import introspection, transcripts
from ledgers.introspection import WakeRecord
from ledgers.vocab import Result, Retrieval
from untrusted import spotlight
from wake.arrival.engine import Block, CacheTier, render
from wake.errors import Unreplayable
from wake.think import prompt, transcript


@dataclass(frozen=True, kw_only=True)
class RecordedCall:
    """One call of the recorded wake: what was called, with what, and what answered it."""

    seq: int
    turn: int
    tool: str
    arguments: str  # canonical JSON of the arguments (the text as stored when it does not parse)
    answer: str | None  # the answer's text as stored (None: its message is missing)
    outcome: str


@dataclass(frozen=True, kw_only=True)
class Recording:
    row: WakeRecord
    blocks: tuple[Block, ...]  # in prompt order, with their stored texts
    declarations: dict[str, dict[str, Any]]  # {tool name: its canonical declaration}
    arrival_hashes: tuple[str, ...]  # the transcript's hashes of the arrival messages (empty: no transcript)
    calls: tuple[RecordedCall, ...]
    messages: tuple[dict[str, object], ...]  # the transcript's messages, decoded

    @property
    def final_text(self) -> str | None:
        """The wake's final answer: the row's, else (a quiet answer, which the row does not keep) the
        last assistant message that called no tool."""
        if self.row.final_text is not None:
            return self.row.final_text
        last = next((m for m in reversed(self.messages) if m.get("role") == "assistant" and not m.get("tool_calls")), None)
        content = last.get("content") if last is not None else None
        return content if isinstance(content, str) and content else None

    def call_at(self, seq: int) -> RecordedCall | None:
        return self.calls[seq] if 0 <= seq < len(self.calls) else None


def canonical_arguments(raw: object) -> str:
    """A call's arguments as canonical JSON, so the same arguments written differently compare equal."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw or "{}")
        except ValueError:
            return str(raw)
    return transcript.canonical(raw if raw is not None else {})


def _answer_text(message: dict[str, object] | None, tool: str) -> str | None:
    if message is None:
        return None
    text = message.get("content")
    if not isinstance(text, str):
        return None
    prefix = transcripts.STRUCTURED_ANSWER.format(tool=tool or "(none)")
    return text.removeprefix(prefix) if message.get("role") == "user" else text


async def read(conn: asyncpg.Connection, wake_id: uuid.UUID) -> Recording:
    row = await introspection.get(conn, wake_id)
    if row is None:
        raise Unreplayable(f"no wake {wake_id}")
    if row.status == "started":
        raise Unreplayable(f"wake {wake_id} has not settled yet: replay it once it has")
    names = list(row.arrival_order) or sorted(row.blocks)
    hashes = [row.blocks[n]["hash"] for n in names if n in row.blocks] + list(row.tool_hashes.values())
    stored = await introspection.contents(conn, hashes)
    blocks = []
    for name in names:
        state = row.blocks.get(name)
        body = stored.get(state["hash"]) if state else None
        if state is None or body is None:
            raise Unreplayable(f"wake {wake_id}: the text of block {name!r} is not stored, so its arrival cannot be rebuilt")
        blocks.append(Block(
            name=name, cache_tier=CacheTier[state.get("cache_tier", "volatile")], text=body[1],
            retrieval=Retrieval(state.get("retrieval", "ok")), result=Result(state.get("result", "present")), reason=state.get("reason"),
            latency_ms=0.0, rows=int(state.get("rows") or 0),
        ))
    declarations = {}
    for name, digest in row.tool_hashes.items():
        body = stored.get(digest)
        if body is None:
            raise Unreplayable(f"wake {wake_id}: the declaration of tool {name!r} is not stored")
        declarations[name] = json.loads(body[1])
    t = await transcripts.read(conn, wake_id)
    messages = tuple(json.loads(body) if body is not None else {} for _, _, body in t.messages)
    arrival = tuple(m.sha256 for m, _, _ in t.messages if m.turn == 0 and m.role in ("system", "user"))[:2]
    calls = tuple(
        RecordedCall(
            seq=c.seq, turn=c.turn, tool=c.tool, arguments=canonical_arguments(body) if body is not None else "",
            answer=_answer_text(messages[c.answer_seq] if 0 <= c.answer_seq < len(messages) else None, c.tool), outcome=c.outcome,
        )
        for c, _, body in t.calls
    )
    return Recording(row=row, blocks=tuple(blocks), declarations=declarations, arrival_hashes=arrival, calls=calls, messages=messages)


def arrival_messages(blocks: tuple[Block, ...], marks: spotlight.Marks) -> list[dict[str, object]]:
    """The first two messages from blocks already in prompt order, as `wake.think.prompt.messages`
    makes them, the agent's marks named in the system message (the order is the recorded one, not
    re-derived: the flags that ordered it are not stored)."""
    settled = [b for b in blocks if b.cache_tier <= CacheTier.stable]
    moving = [b for b in blocks if b.cache_tier > CacheTier.stable]
    system = prompt.PREAMBLE + "\n" + marks.system_note() + ("\n\n" + render(settled) if settled else "")
    user = (render(moving) + "\n\n" if moving else "") + prompt.INSTRUCTION
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def message_hash(message: dict[str, Any]) -> str:
    """The hash the transcript gives an arrival message (its body redacted, canonical JSON)."""
    body = dict(message)
    if isinstance(body.get("content"), str):
        body["content"] = transcript.redacted(body["content"])
    return transcripts.sha256(transcript.canonical(body))
