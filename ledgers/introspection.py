"""`wake_introspection_ledger`: one row per wake attempt — what it saw, what it held, how it ended."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import asyncpg

from ledgers import queries

SETTLED = ("completed", "quiet", "failed", "aborted", "halted", "abandoned", "skipped")


@dataclass(frozen=True, kw_only=True)
class WakeRow:
    """What the cycle writes when it records a wake (docs/design.md, step 7)."""

    wake_id: uuid.UUID
    agent_id: str
    tier: str
    trigger: str
    scheduled_for: dt.datetime | None
    started_at: dt.datetime
    manifest_root: str | None
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool_hashes: dict[str, str] = field(default_factory=dict)
    registry_tool_count: int = 0
    fence: int | None = None
    host: str
    pid: int
    version: str
    config_hash: str
    diff: dict[str, Any] | None = None
    note: str | None = None
    error: str | None = None
    escalation_cause: str | None = None

    @property
    def active_tool_names(self) -> list[str]:
        return sorted(self.tool_hashes)


_sql = queries.named("introspection")


async def insert(conn: asyncpg.Connection, row: WakeRow, *, status: str = "started") -> None:
    await conn.execute(_sql("insert"), *_insert_args(row, status))


async def settle(conn: asyncpg.Connection, wake_id: uuid.UUID, status: str, *, note: str | None = None, error: str | None = None) -> bool:
    """Close a started row; False if it was not open (already settled by someone else)."""
    if status not in SETTLED:
        raise ValueError(f"unknown status {status!r}")
    return await conn.fetchval(_sql("settle"), wake_id, status, note, error) is not None


@dataclass(frozen=True, kw_only=True)
class Thinking:
    """Steps 8-9 as the row stores them."""

    model: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    refusals: int = 0
    stop_reason: str | None = None


async def record_thinking(conn: asyncpg.Connection, wake_id: uuid.UUID, t: Thinking) -> bool:
    """Store the model loop's totals on a started row; False if the row is not open."""
    return await conn.fetchval(
        _sql("record_thinking"), wake_id, t.model, t.prompt_tokens, t.completion_tokens, t.cached_tokens,
        Decimal(str(round(t.cost_usd, 8))), t.turns, t.tool_calls, t.refusals, t.stop_reason,
    ) is not None


async def record_final_text(conn: asyncpg.Connection, wake_id: uuid.UUID, text: str) -> bool:
    return await conn.fetchval(_sql("record_final_text"), wake_id, text) is not None


def _decode(record: asyncpg.Record | None) -> dict[str, Any] | None:
    return None if record is None else queries.decoded([record], ("blocks", "tool_hashes", "diff"))[0]


async def get(conn: asyncpg.Connection, wake_id: uuid.UUID) -> dict[str, Any] | None:
    return _decode(await conn.fetchrow(_sql("get"), wake_id))


async def resolve_id(conn: asyncpg.Connection, text: str) -> uuid.UUID | None:
    """A full wake id, or a unique prefix of one."""
    try:
        return uuid.UUID(text)
    except ValueError:
        pass
    rows = await conn.fetch(_sql("find_by_prefix"), text.lower())
    return rows[0]["wake_id"] if len(rows) == 1 else None


async def previous_settled(conn: asyncpg.Connection, agent_id: str, tier: str | None, before: dt.datetime) -> dict[str, Any] | None:
    """The agent's newest settled wake with a manifest started before `before` (of `tier`, if given)."""
    if tier is None:
        return _decode(await conn.fetchrow(_sql("previous_settled"), agent_id, before))
    return _decode(await conn.fetchrow(_sql("previous_settled_tier"), agent_id, tier, before))


async def previous_both(
    conn: asyncpg.Connection, agent_id: str, tier: str, before: dt.datetime,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """`previous_settled` of the agent and of its tier, in one round trip."""
    found: dict[str, dict[str, Any] | None] = {"agent": None, "tier": None}
    for record in await conn.fetch(_sql("previous_settled_both"), agent_id, tier, before):
        row = _decode(record)
        assert row is not None
        found[row.pop("previous_of")] = row
    return found["agent"], found["tier"]


def _insert_args(row: WakeRow, status: str) -> tuple[Any, ...]:
    return (
        row.wake_id, row.agent_id, row.tier, row.trigger, row.scheduled_for, status, row.started_at,
        row.manifest_root, json.dumps(row.blocks), len(row.tool_hashes), row.active_tool_names,
        json.dumps(row.tool_hashes), row.registry_tool_count, row.fence, row.host, row.pid,
        row.version, row.config_hash, json.dumps(row.diff) if row.diff is not None else None,
        row.note, row.error, row.escalation_cause,
    )


async def insert_fenced(conn: asyncpg.Connection, row: WakeRow, *, status: str = "started") -> bool:
    """Insert the row in one statement that checks `row.fence` is the agent's newest (None: not
    fenced); False when it is not, and nothing was written."""
    return await conn.fetchval(_sql("insert_fenced"), *_insert_args(row, status)) is not None


async def insert_settled_fenced(conn: asyncpg.Connection, row: WakeRow, status: str, thinking: Thinking | None) -> bool:
    """Insert the row of a wake that called no model already settled (`status`, its totals), in
    one statement that checks `row.fence`; False when it is stale, and nothing was written."""
    if status not in SETTLED:
        raise ValueError(f"unknown status {status!r}")
    t = thinking or Thinking(model=None)
    return await conn.fetchval(
        _sql("insert_settled_fenced"), *_insert_args(row, status), t.model, t.prompt_tokens, t.completion_tokens, t.cached_tokens,
        Decimal(str(round(t.cost_usd, 8))), t.turns, t.tool_calls, t.refusals, t.stop_reason,
    ) is not None


async def settle_fenced(
    conn: asyncpg.Connection, wake_id: uuid.UUID, agent_id: str, fence: int | None, status: str, *, note: str | None = None,
    error: str | None = None, thinking: Thinking | None = None,
) -> bool:
    """Close a started row, with the loop's totals, in one statement that checks the fence (None:
    not fenced); False when the row was not open or the fence is stale (nothing was written)."""
    if status not in SETTLED:
        raise ValueError(f"unknown status {status!r}")
    t = thinking or Thinking(model=None)
    return await conn.fetchval(
        _sql("settle_fenced"), wake_id, agent_id, fence, thinking is not None, status, note, error,
        t.model, t.prompt_tokens, t.completion_tokens, t.cached_tokens, Decimal(str(round(t.cost_usd, 8))), t.turns, t.tool_calls,
        t.refusals, t.stop_reason,
    ) is not None


async def recent(
    conn: asyncpg.Connection, *, agent_id: str | None = None, tier: str | None = None, status: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch(_sql("recent"), agent_id, tier, status, limit)]


async def last_two(conn: asyncpg.Connection, agent_id: str) -> list[uuid.UUID]:
    return [r["wake_id"] for r in await conn.fetch(_sql("last_two"), agent_id)]


async def abandon_started(conn: asyncpg.Connection, agent_id: str, reason: str) -> list[dict[str, Any]]:
    """Close every row of the agent still `started` as `abandoned`; call only under the agent's
    lease (its previous holder is gone). Returns the rows closed."""
    return [dict(r) for r in await conn.fetch(_sql("abandon_started"), agent_id, reason)]


async def agents_with_started(conn: asyncpg.Connection) -> list[str]:
    return [r["agent_id"] for r in await conn.fetch(_sql("agents_with_started"))]
