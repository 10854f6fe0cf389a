"""Rows left `started` by a process that is dead on this host.

A wake killed with SIGKILL leaves its row `started` and its lease held until the lease's TTL ends
(a day, for a daily tier's lease). The next lease holder closes such rows (`introspection.
abandon_started`), but a daemon starting again on the same host can tell sooner: a row written on
this host by a pid that is no longer alive belongs to a process that can never write again, so it
is closed `abandoned` at once, each linked into its agent's chain.

A process can also die after it claimed a slot (or a one-shot) and before the slot's row exists (a surface wake
waiting for a busy agent's lease, say): the claim is spent, so no other replica runs the slot,
and nothing else would ever write its row. A daemon starting on the claimer's host finds such
claims (`dead_claims`) and writes each its one row (`record_claim_row`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from ledgers import introspection, queries

_sql = queries.named("harden")
_claims_sql = queries.named("faults")


async def dead_on_host(conn: asyncpg.Connection, host: str, alive: Callable[[int], bool]) -> dict[str, list[int]]:
    """agent -> the pids on `host` that left rows `started` and are not `alive`."""
    dead: dict[str, set[int]] = {}
    for row in await conn.fetch(_sql("started_by_host"), host):
        if not alive(int(row["pid"])):
            dead.setdefault(str(row["agent_id"]), set()).add(int(row["pid"]))
    return {agent: sorted(pids) for agent, pids in dead.items()}


async def abandon_dead(conn: asyncpg.Connection, agent_id: str, host: str, pids: Sequence[int], reason: str) -> list[dict[str, Any]]:
    """Close the agent's `started` rows written on `host` by `pids` (dead), each linked into the
    chain; returns the rows closed."""
    async with conn.transaction():
        closed = [dict(r) for r in await conn.fetch(_sql("abandon_started_pids"), agent_id, reason, host, list(pids))]
        for row in closed:
            row["chain"] = await introspection.link(conn, agent_id, row["wake_id"])
    return closed


@dataclass(frozen=True, kw_only=True)
class ClaimWithoutRow:
    """A slot or one-shot claimed with no row: by a process dead on this host (`dead_claims`), or
    by this one when its wake wrote none (its fence went stale first)."""

    agent_id: str
    tier: str
    scheduled_for: dt.datetime | None  # None: a one-shot (trigger `at`)
    trigger: str
    claimed_by: str  # host:pid:random, the claimer's replica id
    claimed_at: dt.datetime
    wake_id: uuid.UUID


def claimer_pid(claimed_by: str, host: str) -> int | None:
    """The pid in a replica id `host:pid:random` when it names this host, else None."""
    parts = claimed_by.split(":")
    return int(parts[1]) if len(parts) >= 2 and parts[0] == host and parts[1].isdigit() else None


async def dead_claims(
    conn: asyncpg.Connection, host: str, tiers: Sequence[tuple[str, str]], since: dt.datetime, alive: Callable[[int], bool],
) -> list[ClaimWithoutRow]:
    """The slots of `tiers` ((agent, tier) pairs) and the one-shots claimed after `since` on `host`
    by a process that is not `alive`, and that have no row."""
    found = [
        *await conn.fetch(_claims_sql("claims_without_row"), [a for a, _ in tiers], [t for _, t in tiers], since, f"{host}:%"),
        *await conn.fetch(_claims_sql("oneshots_without_row"), since, f"{host}:%"),
    ]
    dead = []
    for row in found:
        pid = claimer_pid(str(row["claimed_by"]), host)
        if pid is not None and not alive(pid):
            dead.append(ClaimWithoutRow(**dict(row)))
    return dead


async def record_claim_row(conn: asyncpg.Connection, claim: ClaimWithoutRow, row: introspection.WakeRow, status: str) -> str | None:
    """Write the slot's one row (`row`, with the claim's wake id) under a lock on its claim, unless
    it has a row by then; returns the row's chain link, or None when nothing was written."""
    async with conn.transaction():
        if claim.scheduled_for is None:
            await conn.fetchval(_claims_sql("lock_oneshot"), claim.wake_id)
        else:
            await conn.fetchval(_claims_sql("lock_claim"), claim.agent_id, claim.tier, claim.scheduled_for)
        if await conn.fetchval(_claims_sql("slot_has_row"), claim.agent_id, claim.tier, claim.scheduled_for, claim.wake_id):
            return None
        return await introspection.insert(conn, row, status=status)
