"""`wake_slots`: each scheduled (agent, tier, scheduled_for) is claimed once, across replicas and restarts."""

from __future__ import annotations

import datetime as dt
import uuid
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


async def claim_reading_fence(
    conn: asyncpg.Connection, *, agent_id: str, tier: str, scheduled_for: dt.datetime, trigger: str, claimed_by: str,
    claimed_at: dt.datetime, wake_id: uuid.UUID,
) -> tuple[bool, int | None]:
    """`claim`, and the agent's newest fence (None: it has none yet), in one round trip."""
    row = await conn.fetchrow(_sql("claim_reading_fence"), agent_id, tier, scheduled_for, trigger, claimed_by, claimed_at, wake_id)
    assert row is not None
    return row["won"] is not None, row["fence"]


async def holder(conn: asyncpg.Connection, agent_id: str, tier: str, scheduled_for: dt.datetime) -> dict[str, Any] | None:
    row = await conn.fetchrow(_sql("holder"), agent_id, tier, scheduled_for)
    return dict(row) if row is not None else None


async def last_claimed(conn: asyncpg.Connection, agent_id: str, tier: str) -> dt.datetime | None:
    value: dt.datetime | None = await conn.fetchval(_sql("last_claimed"), agent_id, tier)
    return value
