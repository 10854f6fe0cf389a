"""`last_actions`: the confirmed mutating actions of an agent, across surfaces."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from ledgers import queries, rows

_sql = queries.named("actions")


async def record(
    conn: asyncpg.Connection, *, agent_id: str, surface: str, tool: str, summary: str, arguments: dict[str, Any],
    wake_id: uuid.UUID | None, fence: int | None, acted_at: dt.datetime,
) -> int:
    """Record one confirmed action; call inside the same fenced transaction as the action's write
    when there is one."""
    return int(await conn.fetchval(_sql("record"), agent_id, surface, tool, summary, json.dumps(arguments), wake_id, fence, acted_at))


@dataclass(frozen=True, kw_only=True)
class Action(rows.Row):
    """One confirmed mutating action: which tool on which surface, and the arguments it was called with."""

    json_columns = ("arguments",)

    action_id: int
    surface: str
    tool: str
    summary: str
    arguments: dict[str, object]
    wake_id: uuid.UUID | None
    fence: int | None
    acted_at: dt.datetime


async def since(conn: asyncpg.Connection, agent_id: str, after: dt.datetime, *, limit: int) -> tuple[list[Action], int]:
    """Up to `limit` actions at or after `after`, newest first, and their total (a COUNT, never the
    LIMIT), counted up to `queries.COUNT_READ`: render it with `queries.count_text`."""
    return rows.counted(Action, await conn.fetch(_sql("since"), agent_id, after, limit, queries.COUNT_READ), limit)
