"""Context pressure ledgers: `wake_turns` (pressure before each model call), `conversation_archive`
(what compactions removed) and `context_events` (the audit of every pressure event).

`context_events` is the audit an agent reads about its own context: every narrowing, reminder,
choice point, compaction, decline, automatic compaction and change of its own settings, each with
the pressure before and after and the reason. An agent's own settings (`context_config_set`) are
the newest `config_set` event of each key.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from typing import Any

import asyncpg

from ledgers import queries

_sql = queries.named("context_events")

KINDS = ("narrowed", "reminded", "choice", "compacted", "declined", "deferred", "auto_compacted", "config_set")
COUNTED = ("server", "usage", "estimate")


async def record_turn(
    conn: asyncpg.Connection, *, wake_id: uuid.UUID, turn: int, agent_id: str, prompt_tokens: int, context_window: int,
    counted: str, max_tokens: int, at: dt.datetime,
) -> None:
    pressure = prompt_tokens / context_window
    await conn.execute(_sql("record_turn"), wake_id, turn, agent_id, prompt_tokens, context_window, pressure, counted, max_tokens, at)
    await conn.execute(_sql("raise_peak"), wake_id, pressure)  # the row's peak (a dry run has no row: nothing to raise)


async def peak(conn: asyncpg.Connection, wake_id: uuid.UUID) -> float | None:
    """The wake's peak pressure, from its row; None before its first model call."""
    value: float | None = await conn.fetchval(_sql("peak"), wake_id)
    return value


async def turns(conn: asyncpg.Connection, wake_id: uuid.UUID) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch(_sql("turns"), wake_id)]


async def last_wake_peak(conn: asyncpg.Connection, agent_id: str) -> dict[str, Any] | None:
    row = await conn.fetchrow(_sql("last_wake_peak"), agent_id)
    return dict(row) if row else None


async def archive(
    conn: asyncpg.Connection, *, wake_id: uuid.UUID, segment: int, agent_id: str, strategy: str, messages: list[dict[str, Any]],
    at: dt.datetime,
) -> None:
    await conn.execute(_sql("archive"), wake_id, segment, agent_id, strategy, json.dumps(messages, ensure_ascii=False), at)


async def archived(conn: asyncpg.Connection, *, agent_id: str, wake_id: uuid.UUID, segment: int) -> dict[str, Any] | None:
    row = await conn.fetchrow(_sql("archived"), wake_id, segment, agent_id)
    if row is None:
        return None
    out = dict(row)
    out["messages"] = json.loads(out["messages"])
    return out


async def record(
    conn: asyncpg.Connection, *, agent_id: str, kind: str, reason: str, at: dt.datetime, wake_id: uuid.UUID | None = None,
    turn: int | None = None, strategy: str | None = None, pressure_before: float | None = None, pressure_after: float | None = None,
    detail: Mapping[str, Any] | None = None,
) -> int:
    if kind not in KINDS:
        raise ValueError(f"unknown context event kind {kind!r}; expected one of {', '.join(KINDS)}")
    event_id: int = await conn.fetchval(
        _sql("record"), agent_id, wake_id, turn, kind, strategy, pressure_before, pressure_after, reason,
        json.dumps(dict(detail or {}), ensure_ascii=False, default=str), at,
    )
    return event_id


async def recent(conn: asyncpg.Connection, agent_id: str, *, since: dt.datetime, limit: int = 50) -> list[dict[str, Any]]:
    out = []
    for r in await conn.fetch(_sql("recent"), agent_id, since, limit):
        row = dict(r)
        row["detail"] = json.loads(row["detail"])
        out.append(row)
    return out


async def settings(conn: asyncpg.Connection, agent_id: str) -> dict[str, Any]:
    """The agent's own settings: {key: newest value it set}."""
    return {r["key"]: json.loads(r["value"]) for r in await conn.fetch(_sql("settings"), agent_id)}
