"""`settled_state`: the default table behind the first line of the settled-facts block."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("settled")


async def record_state(
    conn: asyncpg.Connection, *, agent_id: str, subject: str, state: str, state_on: dt.date, settled_at: dt.datetime
) -> int:
    return int(await conn.fetchval(_sql("record_state"), agent_id, subject, state, state_on, settled_at))


@dataclass(frozen=True, kw_only=True)
class State(rows.Row):
    """The agent's newest settled state: `state_on` as the SQL formats it (YYYY-MM-DD)."""

    state_id: int
    subject: str
    state: str
    state_on: str
    settled_at: dt.datetime


async def latest_state(conn: asyncpg.Connection, agent_id: str) -> State | None:
    return rows.one_of(State, await conn.fetchrow(_sql("latest_state"), agent_id))


