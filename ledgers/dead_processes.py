"""Rows left `started` by a process that is dead on this host.

A wake killed with SIGKILL leaves its row `started` and its lease held until the lease's TTL ends
(a day, for a daily tier's lease). The next lease holder closes such rows (`introspection.
abandon_started`), but a daemon starting again on the same host can tell sooner: a row written on
this host by a pid that is no longer alive belongs to a process that can never write again, so it
is closed `abandoned` at once, each linked into its agent's chain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from ledgers import introspection, queries

_sql = queries.named("harden")


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
