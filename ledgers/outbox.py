"""`wake_outbox`: deliveries of settled wakes, written with the settle and sent by the daemon.

The row is inserted in the same fenced transaction that settles the wake, so a wake is settled
`completed` with its deliveries queued, or not at all. The sender takes due rows (`take_due`
locks them for a while, so two replicas never send one row at once), counts each attempt before
it makes it, and marks the row `sent`, or `dead` after the route's attempts. A sender that dies
mid-send leaves the row `pending`: once its lock runs out it is sent again, with the same wake id
as the idempotency key, so a receiver that keeps the keys it has seen acts on it once.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("outbox")


async def enqueue(
    conn: asyncpg.Connection, *, wake_id: uuid.UUID, route: str, agent_id: str, tier: str, payload: dict[str, object], at: dt.datetime,
) -> int | None:
    """Queue one delivery; None if this wake already has one for the route."""
    value: int | None = await conn.fetchval(_sql("enqueue"), wake_id, route, agent_id, tier, json.dumps(payload, default=str), at)
    return value


@dataclass(frozen=True, kw_only=True)
class Due(rows.Row):
    """A row `take_due` locked for this sender: what an attempt sends and counts."""

    json_columns = ("payload",)

    id: int
    wake_id: uuid.UUID
    route: str
    agent_id: str
    tier: str
    payload: dict[str, object]  # the delivery's JSON document, as the settle queued it
    attempts: int
    created_at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Delivery(rows.Row):
    """A row of `wake_outbox`, every column (`wake outbox` lists them)."""

    json_columns = ("payload",)

    id: int
    wake_id: uuid.UUID
    route: str
    agent_id: str
    tier: str
    payload: dict[str, object]
    state: str  # pending | sent | dead
    attempts: int
    created_at: dt.datetime
    next_attempt_at: dt.datetime
    locked_by: str | None
    locked_until: dt.datetime | None
    last_error: str | None
    sent_at: dt.datetime | None


@dataclass(frozen=True, kw_only=True)
class DeliveryState(rows.Row):
    """Where one delivery of a wake stands (`of_wake`)."""

    id: int
    route: str
    state: str
    attempts: int
    last_error: str | None
    sent_at: dt.datetime | None


async def take_due(conn: asyncpg.Connection, *, now: dt.datetime, until: dt.datetime, sender: str, limit: int) -> list[Due]:
    return rows.all_of(Due, await conn.fetch(_sql("take_due"), now, until, sender, limit))


async def attempt(conn: asyncpg.Connection, row_id: int, sender: str, until: dt.datetime) -> int | None:
    """The attempt's number (counted before it is made), or None if the row is no longer ours to send."""
    value: int | None = await conn.fetchval(_sql("attempt"), row_id, sender, until)
    return value


async def failed_attempt(conn: asyncpg.Connection, row_id: int, sender: str, error: str) -> None:
    await conn.fetchval(_sql("failed_attempt"), row_id, sender, error)


async def sent(conn: asyncpg.Connection, row_id: int, at: dt.datetime) -> bool:
    return await conn.fetchval(_sql("sent"), row_id, at) is not None


async def dead(conn: asyncpg.Connection, row_id: int, error: str) -> bool:
    return await conn.fetchval(_sql("dead"), row_id, error) is not None


async def retry(conn: asyncpg.Connection, row_id: int, at: dt.datetime) -> bool:
    """False when the row does not exist or was already delivered."""
    return await conn.fetchval(_sql("retry"), row_id, at) is not None


async def get(conn: asyncpg.Connection, row_id: int) -> Delivery | None:
    return rows.one_of(Delivery, await conn.fetchrow(_sql("get"), row_id))


async def listing(conn: asyncpg.Connection, *, dead_only: bool = False, limit: int = 50) -> list[Delivery]:
    return rows.all_of(Delivery, await conn.fetch(_sql("listing"), dead_only, limit))


async def of_wake(conn: asyncpg.Connection, wake_id: uuid.UUID) -> list[DeliveryState]:
    return rows.all_of(DeliveryState, await conn.fetch(_sql("of_wake"), wake_id))


async def backlog(conn: asyncpg.Connection) -> int:
    value: int = await conn.fetchval(_sql("backlog"))
    return value
