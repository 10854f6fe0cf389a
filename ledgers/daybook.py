"""`daybook`: what the agent wrote at the end of its wakes (the model loop appends the final
assistant text; the `write_daybook` tool appends mid-wake)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("daybook")


def unchecked_mark(blocks: Sequence[str]) -> str:
    """How an entry written while `blocks` could not be checked is marked wherever it is shown."""
    return f"written while {', '.join(blocks)} could not be checked"


async def append(
    conn: asyncpg.Connection, *, agent_id: str, wake_id: uuid.UUID | None, entry: str, written_at: dt.datetime,
    unchecked_blocks: Sequence[str] = (),
) -> int:
    """`unchecked_blocks`: the blocks that had failed when the entry claimed their absence."""
    entry = entry.strip()
    if not entry:
        raise ValueError("a daybook entry must be non-empty")
    return int(await conn.fetchval(_sql("append"), agent_id, wake_id, entry, written_at, list(unchecked_blocks)))


@dataclass(frozen=True, kw_only=True)
class Entry(rows.Row):
    """One daybook entry; `unchecked_blocks`: the blocks that had failed when it claimed their absence."""

    entry_id: int
    wake_id: uuid.UUID | None
    entry: str
    written_at: dt.datetime
    unchecked_blocks: list[str]


async def recent(conn: asyncpg.Connection, agent_id: str, *, limit: int) -> tuple[list[Entry], int]:
    """The newest entries and the number of entries (a COUNT, never the LIMIT), counted up to
    `queries.COUNT_READ`: render it with `queries.count_text`."""
    return rows.counted(Entry, await conn.fetch(_sql("recent"), agent_id, limit, queries.COUNT_READ), limit)
