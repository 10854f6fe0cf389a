"""Living summaries (aspects `life_lately`, `presence`) and their fold trail.

A fold replaces an aspect's text with its next version and appends a trail row holding what the
fold merged (`merged_deltas`). The trail has a reader: the summaries arrival block says what
changed since the last fold (docs/design.md, "Lessons": folds written and never read).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

ASPECTS = ("life_lately", "presence")


_sql = queries.named("summaries")


async def fold(conn: asyncpg.Connection, *, agent_id: str, aspect: str, content: str, deltas: list[str], folded_at: dt.datetime) -> int:
    """Write the aspect's next version and its trail row (call inside a transaction)."""
    if aspect not in ASPECTS:
        raise ValueError(f"aspect must be one of {', '.join(ASPECTS)}, got {aspect!r}")
    version = int(await conn.fetchval(_sql("fold"), agent_id, aspect, content, folded_at))
    await conn.fetchval(_sql("trail_append"), agent_id, aspect, version, json.dumps(list(deltas)), folded_at)
    return version


@dataclass(frozen=True, kw_only=True)
class Summary(rows.Row):
    """An aspect's current version and the trail row of that version's fold (all None when it has none)."""

    json_columns = ("merged_deltas",)

    aspect: str
    version: int
    content: str
    folded_at: dt.datetime
    trail_id: int | None
    merged_deltas: list[str] | None
    trail_folded_at: dt.datetime | None


async def current(conn: asyncpg.Connection, agent_id: str) -> list[Summary]:
    return rows.all_of(Summary, await conn.fetch(_sql("current"), agent_id))
