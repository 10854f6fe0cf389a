"""Budgets: what one wake may spend (per tier) and what an agent may spend in a day.

Per wake (`agents.<id>.tiers.<tier>.budget`): model turns that offer tools, tool calls, output
tokens and USD. Per agent and local day (`agents.<id>.daily_cost_cap_usd`): USD, counted in Redis
under `wake:cost:<agent>:<local date>` in micro-dollars. The key is the agent's local date, so the
count starts again at the agent's midnight; it expires two days later.

The counter is a cache of the ledger, never the record: every settled wake's cost is in
`wake_introspection_ledger`. At a wake's start the count is read with the ledger's sum for the
day (`ledgers.costs.spent_today`) whenever the key is missing, and whenever a cap is set; the
larger is what the wake sees, and the counter is raised to it. A Redis restart without
persistence, a flush, or a failover to a replica that missed the last INCRBY therefore never gives
the agent its cap again. A counter that disappears during a wake is seen at its next INCRBY (the
total comes back as this wake's own count) and rebuilt from the ledger the same way.

When any budget is spent the loop makes one last call without tools, for the summary; that call
is the only spending allowed past a budget (bounded by `think.summary_max_tokens`).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis.asyncio as aioredis

from ledgers import costs
from ledgers.vocab import StopReason
from wake import keys, logs
from wake.config import BudgetConfig
from wake.stores import Stores
from wake.think.client import Usage

log = logs.get("wake.think")

COST_KEY = keys.COST
COST_KEY_TTL_S = 2 * 86400
MICRO = 1_000_000
# Raise the counter to ARGV[1] (micro-dollars) unless it already holds more; its TTL ARGV[2]. Returns the count.
_RAISE_TO = """
local c = tonumber(redis.call('GET', KEYS[1]) or '-1')
local floor = tonumber(ARGV[1])
if c < floor then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return floor end
return c
"""


def cost_key(agent_id: str, timezone: str, now: dt.datetime) -> str:
    local_date = now.astimezone(zoneinfo.ZoneInfo(timezone)).date().isoformat()
    return COST_KEY.format(agent=agent_id, date=local_date)


@dataclass(kw_only=True)
class DailyCap:
    """The agent's spending today, counted in Redis and reconciled with the ledger (`ledger_usd`:
    what the agent's settled rows of today cost); `cap_usd=None` means no cap (still counted)."""

    redis: aioredis.Redis
    key: str
    cap_usd: float | None
    ledger_usd: Callable[[], Awaitable[float]]
    counted_micro: int = 0  # what this wake has added

    @classmethod
    def of(cls, stores: Stores, *, agent_id: str, timezone: str, now: dt.datetime, cap_usd: float | None) -> DailyCap:
        """The cap of `agent_id`'s local day at `now`, over the stores' Redis and ledger."""

        async def ledger_usd() -> float:
            async with stores.pg_conn() as conn:
                (spent,) = await costs.spent_today(conn, zones={agent_id: timezone}, now=now)
            return float(spent.spent_usd)

        return cls(redis=stores.redis, key=cost_key(agent_id, timezone, now), cap_usd=cap_usd, ledger_usd=ledger_usd)

    async def _raise_to(self, micro: int) -> int:
        return int(await self.redis.eval(_RAISE_TO, 1, self.key, str(micro), str(COST_KEY_TTL_S)))

    async def spent_usd(self) -> float:
        """Today's spending: the counter's, or the ledger's when the counter is missing or behind."""
        value = await self.redis.get(self.key)
        if value is not None and self.cap_usd is None:
            return int(value) / MICRO
        ledger_micro = round(await self.ledger_usd() * MICRO)
        if value is not None and int(value) >= ledger_micro:
            return int(value) / MICRO
        total = await self._raise_to(ledger_micro)
        log.warning("think.daily_cost_reconciled", key=self.key, counter_micro=None if value is None else int(value), ledger_micro=ledger_micro)
        return total / MICRO

    async def add(self, cost_usd: float) -> float:
        """Count a call's cost; returns today's total."""
        micro = round(cost_usd * MICRO)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incrby(self.key, micro)
            pipe.expire(self.key, COST_KEY_TTL_S)
            total, _ = await pipe.execute()
        self.counted_micro += micro
        if int(total) <= self.counted_micro and micro > 0:  # the counter went missing during this wake: rebuild it
            total = await self._raise_to(round(await self.ledger_usd() * MICRO) + self.counted_micro)
        return int(total) / MICRO

    def reached(self, total_usd: float) -> bool:
        """Whether today's total `total_usd` has reached the cap."""
        return self.cap_usd is not None and total_usd >= self.cap_usd


@dataclass(kw_only=True)
class WakeBudget:
    """The counters of one wake against its tier's budget."""

    limits: BudgetConfig
    turns: int = 0
    tool_calls: int = 0
    usage: Usage = Usage()

    def spend(self, usage: Usage) -> None:
        self.usage = self.usage + usage

    @property
    def output_tokens_left(self) -> int:
        return max(0, self.limits.max_output_tokens - self.usage.completion_tokens)

    @property
    def tool_calls_left(self) -> int:
        return max(0, self.limits.max_tool_calls - self.tool_calls)

    def exhausted(self) -> StopReason | None:
        """The name of the first budget spent, or None."""
        if self.turns >= self.limits.max_turns:
            return StopReason.max_turns
        if self.output_tokens_left <= 0:
            return StopReason.max_output_tokens
        if self.usage.cost_usd > 0 and self.usage.cost_usd >= self.limits.max_cost_usd:
            return StopReason.max_cost_usd
        return None
