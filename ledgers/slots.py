"""`wake_slots`: each scheduled (agent, tier, scheduled_for) is claimed once, across replicas and restarts."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import controls, queries, rows

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
    pause: controls.Pause | None  # the pause holding the slot back at the claim's time


async def claim_reading_fence(
    conn: asyncpg.Connection, *, agent_id: str, tier: str, scheduled_for: dt.datetime, trigger: str, claimed_by: str,
    claimed_at: dt.datetime, wake_id: uuid.UUID,
) -> Claimed:
    """`claim`, the agent's newest fence and the pause in force at `claimed_at`, in one round trip."""
    row = await conn.fetchrow(_sql("claim_reading_fence"), agent_id, tier, scheduled_for, trigger, claimed_by, claimed_at, wake_id)
    assert row is not None
    pause = controls.Pause.from_row({k: row[k] for k in _PAUSE_COLUMNS}) if row["paused_by"] is not None else None
    return Claimed(won=row["won"] is not None, fence=row["fence"], pause=pause)


_PAUSE_COLUMNS = ("agent_id", "tier", "paused_by", "paused_at", "until", "reason")


@dataclass(frozen=True, kw_only=True)
class Holder(rows.Row):
    """Who claimed a slot, when, for which wake, and why it fired."""

    claimed_by: str
    claimed_at: dt.datetime
    wake_id: uuid.UUID
    trigger: str


async def holder(conn: asyncpg.Connection, agent_id: str, tier: str, scheduled_for: dt.datetime) -> Holder | None:
    return rows.one_of(Holder, await conn.fetchrow(_sql("holder"), agent_id, tier, scheduled_for))


async def last_claimed(conn: asyncpg.Connection, agent_id: str, tier: str) -> dt.datetime | None:
    value: dt.datetime | None = await conn.fetchval(_sql("last_claimed"), agent_id, tier)
    return value
