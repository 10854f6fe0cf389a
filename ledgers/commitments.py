"""`commitments`: what the agent said it would do. Due dates are DATE columns, formatted in SQL."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows
from ledgers.errors import AlreadyClosed
from ledgers.errors import CommitmentError as CommitmentError

CLOSED_STATUSES = ("done", "dropped")


_sql = queries.named("commitments")


async def add(
    conn: asyncpg.Connection, *, agent_id: str, title: str, due_on: dt.date | None, created_at: dt.datetime,
    wake_id: uuid.UUID | None = None,
) -> int:
    title = title.strip()
    if not title:
        raise CommitmentError("title must be non-empty")
    return int(await conn.fetchval(_sql("add"), agent_id, title, due_on, wake_id, created_at))


async def complete(
    conn: asyncpg.Connection, *, agent_id: str, commitment_id: int, completed_at: dt.datetime, status: str = "done",
    outcome: str | None = None,
) -> int:
    if status not in CLOSED_STATUSES:
        raise CommitmentError(f"status must be one of {', '.join(CLOSED_STATUSES)}, got {status!r}")
    done = await conn.fetchval(_sql("complete"), commitment_id, agent_id, status, outcome, completed_at)
    if done is None:
        row = await conn.fetchrow(_sql("state"), commitment_id, agent_id)
        if row is None:
            raise CommitmentError(f"no commitment {commitment_id} for agent {agent_id!r}")
        raise AlreadyClosed(f"commitment {commitment_id} is already {row['status']}")
    return int(done)


@dataclass(frozen=True, kw_only=True)
class Open(rows.Row):
    """An open commitment; `due_on` as the SQL formats it (YYYY-MM-DD), None when it has no date."""

    commitment_id: int
    title: str
    due_on: str | None
    created_at: dt.datetime


async def open_newest(conn: asyncpg.Connection, agent_id: str, *, limit: int) -> tuple[list[Open], int]:
    """The newest open commitments and the number open (a COUNT, never the LIMIT), counted up to
    `queries.COUNT_READ`: render it with `queries.count_text`."""
    return rows.counted(Open, await conn.fetch(_sql("open_newest"), agent_id, limit, queries.COUNT_READ), limit)
