"""`agent_fences`: the newest fencing token per agent, and the check every fenced write runs.

A lease holder's fence is recorded with `advance` as soon as the lease is taken. Every write a wake
makes runs `check` first, in the same transaction: it locks the agent's fence row (FOR SHARE), so a
newer holder's `advance` blocks until the older write commits or rolls back, and it raises
`StaleFence` when a newer fence exists. A stale fence therefore writes nothing.
"""

from __future__ import annotations

import asyncpg

from ledgers import queries
from ledgers.errors import StaleFence

_sql = queries.named("fences")


async def newest(conn: asyncpg.Connection, agent_id: str) -> int | None:
    value = await conn.fetchval(_sql("newest"), agent_id)
    return int(value) if value is not None else None


async def advance(conn: asyncpg.Connection, agent_id: str, fence: int) -> int:
    """Record `fence` for the agent (never backwards); return the newest fence after the call."""
    return int(await conn.fetchval(_sql("advance"), agent_id, fence))


async def advance_seeing_started(conn: asyncpg.Connection, agent_id: str, fence: int) -> tuple[int, bool]:
    """`advance`, and in the same statement whether `fence` is then the newest and the agent has
    rows left `started` (for the new holder to close: `introspection.abandon_started`). Returns
    the newest fence and that."""
    record = await conn.fetchrow(_sql("advance_seeing_started"), agent_id, fence)
    assert record is not None
    return int(record["newest"]), bool(record["left_started"])


async def check(conn: asyncpg.Connection, agent_id: str, fence: int) -> None:
    """Raise `StaleFence` unless `fence` is the agent's newest. Call inside the write transaction."""
    if not conn.is_in_transaction():
        raise RuntimeError("fences.check must run inside the write's transaction")
    value = await conn.fetchval(_sql("check"), agent_id)
    current = int(value) if value is not None else None
    if current is None or current != fence:
        raise StaleFence(agent_id, fence, current)
