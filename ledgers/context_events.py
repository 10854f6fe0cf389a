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
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("context_events")

KINDS = ("narrowed", "reminded", "choice", "compacted", "declined", "deferred", "auto_compacted", "config_set")
COUNTED = ("server", "usage", "estimate")


@dataclass(frozen=True, kw_only=True)
class Turn(rows.Row):
    """The pressure before one model call of a wake: `counted` says how `prompt_tokens` was counted (one of COUNTED)."""

    wake_id: uuid.UUID
    turn: int
    agent_id: str
    prompt_tokens: int
    context_window: int
    pressure: float
    counted: str
    max_tokens: int
    at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Peak(rows.Row):
    """The agent's newest wake with turns: its peak pressure, its number of turns, its last turn's time."""

    wake_id: uuid.UUID
    peak: float
    turns: int
    at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Archived(rows.Row):
    """A segment a compaction removed from a wake's conversation, its messages as they were sent."""

    json_columns = ("messages",)

    wake_id: uuid.UUID
    segment: int
    agent_id: str
    strategy: str
    messages: list[dict[str, object]]
    archived_at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Event(rows.Row):
    """One context pressure event (`kind`, one of KINDS), with the pressure before and after and why."""

    json_columns = ("detail",)

    event_id: int
    agent_id: str
    wake_id: uuid.UUID | None
    turn: int | None
    kind: str
    strategy: str | None
    pressure_before: float | None
    pressure_after: float | None
    reason: str
    detail: dict[str, object]  # the event's own facts (a config_set's key, value and previous value, a compaction's ref...)
    at: dt.datetime


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


async def turns(conn: asyncpg.Connection, wake_id: uuid.UUID) -> list[Turn]:
    return rows.all_of(Turn, await conn.fetch(_sql("turns"), wake_id))


async def last_wake_peak(conn: asyncpg.Connection, agent_id: str) -> Peak | None:
    return rows.one_of(Peak, await conn.fetchrow(_sql("last_wake_peak"), agent_id))


async def archive(
    conn: asyncpg.Connection, *, wake_id: uuid.UUID, segment: int, agent_id: str, strategy: str, messages: list[dict[str, object]],
    at: dt.datetime,
) -> None:
    await conn.execute(_sql("archive"), wake_id, segment, agent_id, strategy, json.dumps(messages, ensure_ascii=False), at)


async def archived(conn: asyncpg.Connection, *, agent_id: str, wake_id: uuid.UUID, segment: int) -> Archived | None:
    return rows.one_of(Archived, await conn.fetchrow(_sql("archived"), wake_id, segment, agent_id))


async def record(
    conn: asyncpg.Connection, *, agent_id: str, kind: str, reason: str, at: dt.datetime, wake_id: uuid.UUID | None = None,
    turn: int | None = None, strategy: str | None = None, pressure_before: float | None = None, pressure_after: float | None = None,
    detail: Mapping[str, object] | None = None,
) -> int:
    if kind not in KINDS:
        raise ValueError(f"unknown context event kind {kind!r}; expected one of {', '.join(KINDS)}")
    event_id: int = await conn.fetchval(
        _sql("record"), agent_id, wake_id, turn, kind, strategy, pressure_before, pressure_after, reason,
        json.dumps(dict(detail or {}), ensure_ascii=False, default=str), at,
    )
    return event_id


async def recent(conn: asyncpg.Connection, agent_id: str, *, since: dt.datetime, limit: int = 50) -> list[Event]:
    return rows.all_of(Event, await conn.fetch(_sql("recent"), agent_id, since, limit))


async def settings(conn: asyncpg.Connection, agent_id: str) -> dict[str, object]:
    """The agent's own settings: {key: newest value it set}. A mapping, not a record: its keys are
    the settings the agent chose to set (`wake.think.pressure` knows them), each value any JSON."""
    return {r["key"]: json.loads(r["value"]) for r in await conn.fetch(_sql("settings"), agent_id)}
