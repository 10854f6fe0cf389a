"""What a replica that takes over an agent reads and writes in `wake_slots` (`wake.daemon.ownership`);
its named SQL is `ledgers/sql/scaleout.sql`."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import queries

_sql = queries.named("scaleout")


async def last_claimed(conn: asyncpg.Connection, agents: list[str]) -> dict[tuple[str, str], dt.datetime]:
    """The newest claimed or recorded scheduled slot of every (agent, tier) of `agents` that has one."""
    return {(r["agent_id"], r["tier"]): r["scheduled_for"] for r in await conn.fetch(_sql("last_claimed"), agents) if r["scheduled_for"]}



@dataclass(frozen=True, kw_only=True)
class Rowless:
    """A claimed slot whose wake has no row: its claimer died between the claim and the row."""

    scheduled_for: dt.datetime
    wake_id: uuid.UUID
    claimed_by: str
    claimed_at: dt.datetime


async def claimed_since(
    conn: asyncpg.Connection, since: dict[tuple[str, str], dt.datetime],
) -> tuple[dict[tuple[str, str], set[dt.datetime]], dict[tuple[str, str], list[Rowless]]]:
    """Every slot of each (agent, tier) claimed after its `since`, and those of them without a row."""
    keys = sorted(since)
    found: dict[tuple[str, str], set[dt.datetime]] = {}
    rowless: dict[tuple[str, str], list[Rowless]] = {}
    for r in await conn.fetch(_sql("claimed_since"), [a for a, _ in keys], [t for _, t in keys], [since[k] for k in keys]):
        found.setdefault((r["agent_id"], r["tier"]), set()).add(r["scheduled_for"])
        if r["rowless"]:
            rowless.setdefault((r["agent_id"], r["tier"]), []).append(
                Rowless(scheduled_for=r["scheduled_for"], wake_id=r["wake_id"], claimed_by=r["claimed_by"], claimed_at=r["claimed_at"]))
    return found, rowless


async def claimed_by_then(conn: asyncpg.Connection, since: dict[tuple[str, str], dt.datetime]) -> set[tuple[str, str]]:
    """The (agent, tier) pairs that had a slot claimed at or before their `since`."""
    keys = sorted(since)
    rows = await conn.fetch(_sql("claimed_by_then"), [a for a, _ in keys], [t for _, t in keys], [since[k] for k in keys])
    return {(r["agent_id"], r["tier"]) for r in rows}
