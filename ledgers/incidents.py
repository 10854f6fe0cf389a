"""`wake_incidents`: a tier's failing rows of one error signature grouped into one incident
(docs/incidents.md). Written only by `wake.run.incident_policy`, in the transaction of the row it sees."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("incidents")

SIGNATURE_MAX = 200
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
_HEX = re.compile(r"\b(?:0x[0-9a-f]+|(?=[0-9a-f]*\d)[0-9a-f]{7,})\b", re.IGNORECASE)  # with a digit: not a word
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.\-~]+){2,}[/\\]?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")
# A store outage (`wake.errors.StoreUnavailable`: "<store> unreachable at <address>: <reason>"):
# the reason is the driver's wording of one outage, which differs from call to call (a reset, a
# connection lost mid-query, a refused connect); the outage is the store.
_OUTAGE = re.compile(r"\b((?:postgres|redis|neo4j)(?: \([^)]*\))? unreachable) at \S+?: .*", re.DOTALL)


def signature(error: str | None) -> str:
    """The error text with ids, hex, paths and numbers normalised away: rows that failed the same
    way have one signature whatever wake, fence, port or file they name; a store outage is its
    store, whatever the driver said of it."""
    text = _OUTAGE.sub(r"\1", error or "")
    text = _UUID.sub("<id>", text)
    text = _PATH.sub("<path>", text)
    text = _HEX.sub("<n>", text)  # a hex number and a decimal one are one token: a counter prints either
    text = _NUMBER.sub("<n>", text)
    return _SPACE.sub(" ", text).strip()[:SIGNATURE_MAX] or "<no error text>"


@dataclass(frozen=True, kw_only=True)
class Incident(rows.Row):
    """A row of `wake_incidents`, every column."""

    id: int
    agent_id: str
    tier: str
    signature: str
    sample_error: str
    first_wake_id: uuid.UUID
    last_wake_id: uuid.UUID
    rows_seen: int
    opened_at: dt.datetime
    last_seen_at: dt.datetime
    closed_at: dt.datetime | None
    closed_by_wake: uuid.UUID | None
    acked_by: str | None
    acked_at: dt.datetime | None


@dataclass(frozen=True, kw_only=True)
class Seen(rows.Row):
    """What `open_or_count` did with a failing row: the incident, whether it opened now, its count."""

    id: int
    opened: bool
    rows_seen: int


async def open_or_count(
    conn: asyncpg.Connection, *, agent_id: str, tier: str, sig: str, wake_id: uuid.UUID, error: str, at: dt.datetime,
) -> Seen | None:
    return rows.one_of(Seen, await conn.fetchrow(_sql("open_or_count"), agent_id, tier, sig, wake_id, error[:1000], at))


async def open_once(
    conn: asyncpg.Connection, *, agent_id: str, tier: str, sig: str, about: uuid.UUID, error: str, at: dt.datetime,
) -> int | None:
    """A dead-man incident: its id when this call opened it, None when one of its signature was open."""
    value: int | None = await conn.fetchval(_sql("open_once"), agent_id, tier, sig, about, error[:1000], at)
    return value


async def close_open(conn: asyncpg.Connection, *, agent_id: str, tier: str, at: dt.datetime, wake_id: uuid.UUID) -> list[Incident]:
    return rows.all_of(Incident, await conn.fetch(_sql("close_open"), agent_id, tier, at, wake_id))


async def consecutive_failures(conn: asyncpg.Connection, agent_id: str, tier: str) -> int:
    value: int = await conn.fetchval(_sql("consecutive_failures"), agent_id, tier)
    return value


async def ack(conn: asyncpg.Connection, incident_id: int, by: str, at: dt.datetime, *, agent_id: str | None = None) -> bool:
    """False when there is no such incident (of `agent_id`, when given) or it was acknowledged already."""
    return await conn.fetchval(_sql("ack"), incident_id, by, at, agent_id) is not None


async def get(conn: asyncpg.Connection, incident_id: int) -> Incident | None:
    return rows.one_of(Incident, await conn.fetchrow(_sql("get"), incident_id))


async def listing(conn: asyncpg.Connection, *, include_closed: bool = False, limit: int = 50) -> list[Incident]:
    return rows.all_of(Incident, await conn.fetch(_sql("listing"), include_closed, limit))


async def open_counts(conn: asyncpg.Connection) -> dict[str, int]:
    return {r["agent_id"]: r["open"] for r in await conn.fetch(_sql("open_counts"))}


async def of_agent(conn: asyncpg.Connection, agent_id: str, limit: int = 50) -> list[Incident]:
    """The agent's open incidents, the newest first (the console's agent page)."""
    return rows.all_of(Incident, await conn.fetch(_sql("of_agent"), agent_id, limit))


async def overlapping(conn: asyncpg.Connection, agent_ids: list[str], start: dt.datetime, end: dt.datetime, limit: int = 500) -> list[Incident]:
    """The incidents of these agents with rows between `start` and `end` (the console's timeline)."""
    return rows.all_of(Incident, await conn.fetch(_sql("overlapping"), agent_ids, start, end, limit))
