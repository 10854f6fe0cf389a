"""`settled_state`: the default table behind the first line of the settled-facts block."""

from __future__ import annotations

import datetime as dt
from typing import Any

import asyncpg

from ledgers import queries

_sql = queries.named("settled")


async def record_state(
    conn: asyncpg.Connection, *, agent_id: str, subject: str, state: str, state_on: dt.date, settled_at: dt.datetime
) -> int:
    return int(await conn.fetchval(_sql("record_state"), agent_id, subject, state, state_on, settled_at))


async def latest_state(conn: asyncpg.Connection, agent_id: str) -> dict[str, Any] | None:
    row = await conn.fetchrow(_sql("latest_state"), agent_id)
    return dict(row) if row else None


