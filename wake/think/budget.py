"""Budgets: what one wake may spend (per tier) and what an agent may spend in a day.

Per wake (`agents.<id>.tiers.<tier>.budget`): model turns that offer tools, tool calls, output
tokens and USD. Per agent and local day (`agents.<id>.daily_cost_cap_usd`): USD, counted in Redis
under `wake:cost:<agent>:<local date>` in micro-dollars. The key is the agent's local date, so the
count starts again at the agent's midnight; it expires two days later.

When any budget is spent the loop makes one last call without tools, for the summary; that call
is the only spending allowed past a budget (bounded by `think.summary_max_tokens`).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass

import redis.asyncio as aioredis

from ledgers.vocab import StopReason
from wake import keys
from wake.config import BudgetConfig
from wake.think.client import Usage

COST_KEY = keys.COST
COST_KEY_TTL_S = 2 * 86400
MICRO = 1_000_000


def cost_key(agent_id: str, timezone: str, now: dt.datetime) -> str:
    local_date = now.astimezone(zoneinfo.ZoneInfo(timezone)).date().isoformat()
    return COST_KEY.format(agent=agent_id, date=local_date)


@dataclass(kw_only=True)
class DailyCap:
    """The agent's spending today, in Redis; `cap_usd=None` means no cap (still counted)."""

    redis: aioredis.Redis
    key: str
    cap_usd: float | None

    async def spent_usd(self) -> float:
        value = await self.redis.get(self.key)
        return int(value or 0) / MICRO

    async def add(self, cost_usd: float) -> float:
        """Count a call's cost; returns today's total."""
        micro = round(cost_usd * MICRO)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incrby(self.key, micro)
            pipe.expire(self.key, COST_KEY_TTL_S)
            total, _ = await pipe.execute()
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
