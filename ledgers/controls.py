"""`wake_pauses` and `wake_oneshots`: what operators ask of the schedule, stored where every
replica reads it (docs/daemon.md, "Pause and one-shot wakes")."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("controls")

ALL_TIERS = "all"  # a pause's scope when it holds back every tier of the agent


@dataclass(frozen=True, kw_only=True)
class Pause(rows.Row):
    """A row of `wake_pauses`: `tier` is a tier's name or `ALL_TIERS`; `until` None: until resumed."""

    agent_id: str
    tier: str
    paused_by: str
    paused_at: dt.datetime
    until: dt.datetime | None
    reason: str | None


@dataclass(frozen=True, kw_only=True)
class OneShot(rows.Row):
    """A row of `wake_oneshots`; `status` is its wake's ledger status where the query reads it
    (`oneshots`), None before the wake has a row."""

    wake_id: uuid.UUID
    agent_id: str
    tier: str
    fire_at: dt.datetime
    note: str | None
    created_by: str
    created_at: dt.datetime
    claimed_by: str | None
    claimed_at: dt.datetime | None
    cancelled_by: str | None
    cancelled_at: dt.datetime | None
    status: str | None = None


async def pause(
    conn: asyncpg.Connection, *, agent_id: str, tier: str | None, paused_by: str, paused_at: dt.datetime,
    until: dt.datetime | None, reason: str | None,
) -> None:
    await conn.fetchrow(_sql("pause"), agent_id, tier or ALL_TIERS, paused_by, paused_at, until, reason)


async def resume(conn: asyncpg.Connection, agent_id: str, tier: str | None) -> list[Pause]:
    """Lift the agent's pause of `tier` (`all` for the agent-wide one), or every pause of the agent
    when `tier` is None; returns the pauses lifted."""
    return rows.all_of(Pause, await conn.fetch(_sql("resume"), agent_id, tier))


async def pause_for(conn: asyncpg.Connection, agent_id: str, tier: str, at: dt.datetime) -> Pause | None:
    return rows.one_of(Pause, await conn.fetchrow(_sql("pause_for"), agent_id, tier, at))


async def active_pauses(conn: asyncpg.Connection, at: dt.datetime) -> list[Pause]:
    return rows.all_of(Pause, await conn.fetch(_sql("active_pauses"), at))


async def add_oneshot(
    conn: asyncpg.Connection, *, wake_id: uuid.UUID, agent_id: str, tier: str, fire_at: dt.datetime, note: str | None,
    created_by: str, created_at: dt.datetime,
) -> None:
    await conn.fetchval(_sql("add_oneshot"), wake_id, agent_id, tier, fire_at, note, created_by, created_at)


async def claim_oneshot(conn: asyncpg.Connection, wake_id: uuid.UUID, claimed_by: str, claimed_at: dt.datetime) -> bool:
    """True for the one caller that claims the one-shot; False once claimed or cancelled."""
    return await conn.fetchval(_sql("claim_oneshot"), wake_id, claimed_by, claimed_at) is not None


async def due_oneshots(conn: asyncpg.Connection, at: dt.datetime, limit: int = 100) -> list[OneShot]:
    return rows.all_of(OneShot, await conn.fetch(_sql("due_oneshots"), at, limit))


async def cancel_oneshot(conn: asyncpg.Connection, wake_id: uuid.UUID, cancelled_by: str, at: dt.datetime) -> bool:
    """False when the one-shot already ran (was claimed) or was cancelled."""
    return await conn.fetchval(_sql("cancel_oneshot"), wake_id, cancelled_by, at) is not None


async def oneshot(conn: asyncpg.Connection, wake_id: uuid.UUID) -> OneShot | None:
    return rows.one_of(OneShot, await conn.fetchrow(_sql("oneshot"), wake_id))


async def oneshots(conn: asyncpg.Connection, *, include_done: bool = False, limit: int = 50) -> list[OneShot]:
    """Pending one-shots (and, with `include_done`, claimed and cancelled ones with their wake's status)."""
    return rows.all_of(OneShot, await conn.fetch(_sql("oneshots"), include_done, limit))


async def resolve_oneshot(conn: asyncpg.Connection, text: str) -> uuid.UUID | None:
    """A full one-shot id, or a unique prefix of one."""
    try:
        return uuid.UUID(text)
    except ValueError:
        pass
    rows = await conn.fetch(_sql("find_oneshot_by_prefix"), text.lower())
    return rows[0]["wake_id"] if len(rows) == 1 else None
