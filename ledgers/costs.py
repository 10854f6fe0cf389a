"""What the wakes cost, read from `wake_introspection_ledger` (`wake costs`, docs/operator.md).

The ledger is the record: every settled row carries its tokens and its cost, the quiet ones too,
so a total here is a sum of rows an operator can list with `wake ledger`. The day of a wake is the
local date of its start in its agent's zone.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

import asyncpg

from ledgers import queries, rows

_sql = queries.named("costs")


class By(enum.StrEnum):
    """What `wake costs` groups by."""

    day = "day"
    tier = "tier"
    agent = "agent"


@dataclass(frozen=True, kw_only=True)
class Group(rows.Row):
    """One group's totals: `key` is the day (YYYY-MM-DD), the tier or the agent; `outcomes` each
    status's count; `gated`, `prechecked` and `capped` the wakes that ended before any model call,
    `ok_token` the quiet ones whose answer was the tier's ok_token (their tokens are counted)."""

    json_columns = ("outcomes",)

    key: str
    wakes: int
    outcomes: dict[str, int]
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    cost_usd: Decimal
    turns: int
    gated: int
    prechecked: int
    ok_token: int
    capped: int


@dataclass(frozen=True, kw_only=True)
class Spent(rows.Row):
    """An agent's spending so far in its local day, from its rows."""

    agent_id: str
    spent_usd: Decimal


def _pairs(zones: Mapping[str, str]) -> tuple[list[str], list[str]]:
    agents = sorted(zones)
    return agents, [zones[a] for a in agents]


async def totals(
    conn: asyncpg.Connection, *, zones: Mapping[str, str], since: dt.datetime, agent_id: str | None, by: By,
) -> list[Group]:
    """The groups of rows started at or after `since` (one agent's, or every agent's), in key order.
    `zones` maps each agent to its IANA zone (an agent not in it counts its days in UTC)."""
    agents, names = _pairs(zones)
    return rows.all_of(Group, await conn.fetch(_sql("totals"), agents, names, since, agent_id, by.value))


async def spent_today(conn: asyncpg.Connection, *, zones: Mapping[str, str], now: dt.datetime) -> list[Spent]:
    """Each agent of `zones`, with what its rows started since its local midnight cost."""
    agents, names = _pairs(zones)
    return rows.all_of(Spent, await conn.fetch(_sql("spent_today"), agents, names, now))
