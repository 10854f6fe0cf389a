"""Reads the console adds over existing tables (docs/console.md): what each agent's wakes cost per
local day, and the confirmed actions of one wake. Everything else the console shows it reads
through the ledger functions the CLI calls."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from decimal import Decimal

import asyncpg

from ledgers import queries

_sql = queries.named("console")


@dataclass(frozen=True, kw_only=True)
class DayCost:
    """One agent's local day: its wakes (and how many called a model), their cost and tokens."""

    agent_id: str
    day: str  # YYYY-MM-DD in the agent's zone
    wakes: int
    thought: int
    cost_usd: Decimal
    prompt_tokens: int
    completion_tokens: int


async def daily_costs(conn: asyncpg.Connection, agent_id: str, zone: str, since: dt.datetime) -> list[DayCost]:
    """The agent's days that started at or after `since`, the newest first."""
    return [
        DayCost(agent_id=agent_id, day=r["day"], wakes=r["wakes"], thought=r["thought"], cost_usd=r["cost_usd"],
                prompt_tokens=r["prompt_tokens"], completion_tokens=r["completion_tokens"])
        for r in await conn.fetch(_sql("daily_costs"), agent_id, zone, since)
    ]


@dataclass(frozen=True, kw_only=True)
class Action:
    """One confirmed call of a `mutates` tool (`last_actions`)."""

    action_id: int
    surface: str
    tool: str
    summary: str
    arguments: dict[str, object]
    acted_at: dt.datetime


async def wake_actions(
    conn: asyncpg.Connection, agent_id: str, wake_id: uuid.UUID, started_at: dt.datetime, finished_at: dt.datetime,
) -> list[Action]:
    """The wake's confirmed actions in the order they were made."""
    return [
        Action(action_id=r["action_id"], surface=r["surface"], tool=r["tool"], summary=r["summary"],
               arguments=json.loads(r["arguments"]) if isinstance(r["arguments"], str) else r["arguments"], acted_at=r["acted_at"])
        for r in await conn.fetch(_sql("wake_actions"), agent_id, wake_id, started_at, finished_at)
    ]
