"""Claimed and never recorded: one-shots whose claimer died between the claim and the row
(`wake.run.unrun` decides which claimers are dead; this module reads and writes)."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import introspection, queries, rows
from ledgers.vocab import Status

_sql = queries.named("unrecorded")


@dataclass(frozen=True, kw_only=True)
class Unrecorded(rows.Row):
    """A claimed one-shot with no ledger row."""

    wake_id: uuid.UUID
    agent_id: str
    tier: str
    claimed_by: str
    claimed_at: dt.datetime


async def unrecorded_oneshots(conn: asyncpg.Connection, claimed_before: dt.datetime) -> list[Unrecorded]:
    """The one-shots claimed no later than `claimed_before` that have no row, oldest claim first."""
    return rows.all_of(Unrecorded, await conn.fetch(_sql("unrecorded_oneshots"), claimed_before))


async def record_unrecorded(conn: asyncpg.Connection, row: introspection.WakeRow, *, claimed_by: str | None = None) -> str | None:
    """Write the wake's one row, `failed` (claimed, never run), linked into the chain, unless it has one by now. With
    `claimed_by`, a one-shot's: its claim is locked first, so of several replicas one writes it, and
    nothing is written once the claim is no longer `claimed_by`'s. Returns the chain link, or None
    when nothing was written."""
    async with conn.transaction():
        if claimed_by is not None and await conn.fetchval(_sql("lock_claim"), row.wake_id, claimed_by) is None:
            return None
        if await conn.fetchval(_sql("has_row"), row.wake_id):
            return None
        return await introspection.insert(conn, row, status=Status.failed)
