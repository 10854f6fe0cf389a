"""`wake_replays`: a recorded wake replayed against a candidate, stored apart from the agent's
ledgers (docs/replay.md). One writer (`insert`): the replay's row, its transcript, its calls and
the bodies behind their hashes, in one transaction on the owner's login; nothing here writes a
row of the agent's own ledgers.

A replay's transcript has the shape of a wake's (`ledgers.transcripts.Message`, `Call`), with
what answered each call (`answered_from`) and whether the tool mutates, on each call.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import asyncpg

from ledgers import ids, queries, rows, transcripts
from ledgers.transcripts import Call, Message

_sql = queries.named("replays")

ANSWERED_FROM = ("recorded", "out_of_recording", "live", "checked")


@dataclass(frozen=True, kw_only=True)
class ReplayCall:
    """One call the replay's model made: the transcript's record, and what answered it."""

    call: Call
    answered_from: str
    mutates: bool


@dataclass(frozen=True, kw_only=True)
class ReplayRecord(rows.Row):
    """A row of `wake_replays`, as written and as read (every column)."""

    json_columns = ("candidate", "manifest", "report")

    replay_id: uuid.UUID
    wake_id: uuid.UUID
    agent_id: str
    tier: str
    route: str
    model: str
    candidate: dict[str, object]
    live_readonly: bool
    request_sha256: str
    request_matches: bool | None
    manifest: dict[str, Any]
    manifest_root: str
    transcript_root: str | None
    status: str
    stop_reason: str | None
    note: str | None
    error: str | None
    final_text: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: Decimal
    turns: int
    tool_calls: int
    refusals: int
    out_of_recording: int
    live_calls: int
    report: dict[str, object]
    duration_ms: float
    started_at: dt.datetime
    finished_at: dt.datetime

    def columns(self) -> dict[str, object]:
        """The row as `wake replay show --json` prints it: JSON, so a dict."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


async def insert(
    conn: asyncpg.Connection, row: ReplayRecord, contents: Mapping[str, tuple[str, str]], messages: Sequence[Message],
    calls: Sequence[ReplayCall],
) -> None:
    """Write the replay whole: its bodies, its row, its transcript and its calls, in one transaction."""
    keys = sorted(contents)
    async with conn.transaction():
        if keys:
            await conn.execute(_sql("store_contents"), keys, [contents[k][0] for k in keys], [contents[k][1] for k in keys])
        r = row
        await conn.execute(
            _sql("insert"), r.replay_id, r.wake_id, r.agent_id, r.tier, r.route, r.model, json.dumps(r.candidate), r.live_readonly,
            r.request_sha256, r.request_matches, json.dumps(r.manifest), r.manifest_root, r.transcript_root, r.status, r.stop_reason,
            r.note, r.error, r.final_text, r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.cost_usd, r.turns, r.tool_calls,
            r.refusals, r.out_of_recording, r.live_calls, json.dumps(r.report, default=str), r.duration_ms, r.started_at, r.finished_at,
        )
        if messages:
            await conn.execute(
                _sql("insert_messages"), r.replay_id, [m.seq for m in messages], [m.turn for m in messages], [m.role for m in messages],
                [m.sha256 for m in messages], [m.chars for m in messages], [m.cut for m in messages],
            )
        if calls:
            cs = [c.call for c in calls]
            await conn.execute(
                _sql("insert_calls"), r.replay_id, [c.seq for c in cs], [c.turn for c in cs], [c.call_id for c in cs], [c.tool for c in cs],
                [c.arguments_sha256 for c in cs], [c.answer_seq for c in cs], [c.outcome for c in cs], [c.answered_from for c in calls],
                [c.mutates for c in calls], [c.latency_ms for c in cs],
            )


async def get(conn: asyncpg.Connection, replay_id: uuid.UUID) -> ReplayRecord | None:
    found = await conn.fetchrow(_sql("get"), replay_id)
    return None if found is None else ReplayRecord.from_row(found)


async def recent(
    conn: asyncpg.Connection, *, wake_id: uuid.UUID | None = None, agent_id: str | None = None, limit: int = 20,
) -> list[ReplayRecord]:
    return [ReplayRecord.from_row(r) for r in await conn.fetch(_sql("recent"), wake_id, limit, agent_id)]


async def resolve_id(conn: asyncpg.Connection, text: str, agent_id: str | None = None) -> uuid.UUID | None:
    """A replay's full id, or the one replay a prefix names (with `agent_id`, among that agent's
    replays only); `ids.BadPrefix`, `ids.AmbiguousPrefix` as for wakes."""
    try:
        full = uuid.UUID(text)
    except ValueError:
        low, high = ids.prefix_range(text)
    else:
        low = high = full
    found = await conn.fetch(_sql("find_by_prefix"), low, high, ids.LISTED_MATCHES, agent_id)
    return ids.unique(found, what="replay", prefix=text, column="replay_id")


async def manifest_bodies(conn: asyncpg.Connection, hashes: Sequence[str]) -> dict[str, str]:
    """The texts a replay's manifest names (its blocks, its tools' declarations), by hash; a hash not stored is absent."""
    return {r["sha256"]: r["body"] for r in await conn.fetch(_sql("manifest_bodies"), list(hashes))}


@dataclass(frozen=True, kw_only=True)
class StoredReplay:
    """A replay's transcript as read back: (record, body) of each message, and each call with its body."""

    messages: list[tuple[Message, str | None]]
    calls: list[tuple[ReplayCall, str | None]]


async def transcript(conn: asyncpg.Connection, replay_id: uuid.UUID) -> StoredReplay:
    messages = [
        (Message(seq=r["seq"], turn=r["turn"], role=r["role"], sha256=r["sha256"], chars=r["chars"], cut=r["cut"]), r["body"])
        for r in await conn.fetch(_sql("messages"), replay_id)
    ]
    calls = [
        (ReplayCall(
            call=Call(seq=r["seq"], turn=r["turn"], call_id=r["call_id"], tool=r["tool"], arguments_sha256=r["arguments_sha256"],
                      answer_seq=r["answer_seq"], outcome=r["outcome"], latency_ms=r["latency_ms"]),
            answered_from=r["answered_from"], mutates=r["mutates"],
        ), r["body"])
        for r in await conn.fetch(_sql("calls"), replay_id)
    ]
    return StoredReplay(messages=messages, calls=calls)


def as_dict(record: ReplayRecord, stored: StoredReplay) -> dict[str, Any]:
    """A replay's transcript as data, in the shape of a wake's (`ledgers.transcripts.as_dict`), each
    call with what answered it (`answered_from`) and whether its tool mutates: `wake show REPLAY
    --transcript [--json]`, `wake replay show --transcript` and the console read this."""
    messages, texts = transcripts.shown_messages(stored.messages)
    calls = [
        {"seq": c.call.seq, "turn": c.call.turn, "call_id": c.call.call_id, "tool": c.call.tool, "arguments": body,
         "answer_seq": c.call.answer_seq, "answer": texts.get(c.call.answer_seq), "outcome": c.call.outcome, "ok": c.call.outcome == "ok",
         "latency_ms": c.call.latency_ms, "answered_from": c.answered_from, "mutates": c.mutates}
        for c, body in stored.calls
    ]
    return {
        "replay_id": str(record.replay_id), "wake_id": str(record.wake_id), "agent_id": record.agent_id, "tier": record.tier,
        "status": record.status, "transcript_root": record.transcript_root, "messages": messages, "calls": calls,
    }


async def selectable(
    conn: asyncpg.Connection, *, agent_id: str | None, tier: str | None, status: str | None, since: dt.datetime | None, limit: int,
) -> list[uuid.UUID]:
    """The settled wakes that called a model, oldest first, as `wake eval` selects them."""
    return [r["wake_id"] for r in await conn.fetch(_sql("selectable"), agent_id, tier, status, since, limit)]


@dataclass(frozen=True, kw_only=True)
class EvalRecord(rows.Row):
    """A row of `wake_replay_evals`: one agent's scorecard of one `wake eval` run."""

    json_columns = ("candidate", "scorecard")

    eval_id: uuid.UUID
    agent_id: str
    wakes: int
    threshold: float
    candidate: dict[str, object]
    regressed: list[str]
    scorecard: dict[str, object]
    started_at: dt.datetime
    finished_at: dt.datetime


async def insert_evals(conn: asyncpg.Connection, records: Sequence[EvalRecord]) -> None:
    """Store one eval run's scorecards (one per agent), together."""
    async with conn.transaction():
        for r in records:
            await conn.execute(_sql("insert_eval"), r.eval_id, r.agent_id, r.wakes, r.threshold, json.dumps(r.candidate, default=str),
                               list(r.regressed), json.dumps(r.scorecard, default=str), r.started_at, r.finished_at)


async def evals_of_agent(conn: asyncpg.Connection, agent_id: str, limit: int = 20) -> list[EvalRecord]:
    """An agent's stored scorecards, newest first."""
    return [EvalRecord.from_row(r) for r in await conn.fetch(_sql("evals_of_agent"), agent_id, limit)]


async def eval_of_agent(conn: asyncpg.Connection, eval_id: uuid.UUID, agent_id: str) -> EvalRecord | None:
    """One run's scorecard of `agent_id`'s wakes; None when that run replayed none of its wakes."""
    found = await conn.fetchrow(_sql("eval_of_agent"), eval_id, agent_id)
    return None if found is None else EvalRecord.from_row(found)
