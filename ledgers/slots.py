"""`wake_slots`: each scheduled (agent, tier, scheduled_for) is claimed once, across replicas and restarts."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from ledgers import queries

_sql = queries.named("slots")


async def claim(
    conn: asyncpg.Connection, *, agent_id: str, tier: str, scheduled_for: dt.datetime, trigger: str, claimed_by: str,
    claimed_at: dt.datetime, wake_id: uuid.UUID,
) -> bool:
    """True if this caller won the slot; False if it was already claimed (by anyone, ever)."""
    return await conn.fetchval(_sql("claim"), agent_id, tier, scheduled_for, trigger, claimed_by, claimed_at, wake_id) is not None


@dataclass(frozen=True, kw_only=True)
class Claimed:
    """What a slot claim read in its round trip (`claim_reading_fence`)."""

    won: bool
    fence: int | None  # the agent's newest fence; None: it has none yet
    pause: dict[str, Any] | None  # the pause holding the slot back at the claim's time: paused_by, until, reason


async def claim_reading_fence(
    conn: asyncpg.Connection, *, agent_id: str, tier: str, scheduled_for: dt.datetime, trigger: str, claimed_by: str,
    claimed_at: dt.datetime, wake_id: uuid.UUID,
) -> Claimed:
    """`claim`, the agent's newest fence and the pause in force at `claimed_at`, in one round trip."""
    row = await conn.fetchrow(_sql("claim_reading_fence"), agent_id, tier, scheduled_for, trigger, claimed_by, claimed_at, wake_id)
    assert row is not None
    pause = {k: row[k] for k in ("paused_by", "until", "reason")} if row["paused_by"] is not None else None
    return Claimed(won=row["won"] is not None, fence=row["fence"], pause=pause)


async def holder(conn: asyncpg.Connection, agent_id: str, tier: str, scheduled_for: dt.datetime) -> dict[str, Any] | None:
    row = await conn.fetchrow(_sql("holder"), agent_id, tier, scheduled_for)
    return dict(row) if row is not None else None


async def last_claimed(conn: asyncpg.Connection, agent_id: str, tier: str) -> dt.datetime | None:
    value: dt.datetime | None = await conn.fetchval(_sql("last_claimed"), agent_id, tier)
    return value
