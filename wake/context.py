"""The typed wake: what was asked for (`WakeRequest`) and what the running wake knows (`WakeContext`).

Every step after the lease receives these two: the arrival sources and the tools read the context
(tools through the `surfaces.context.ToolContext` Protocol it satisfies), and the cycle, the claim
path and the daemon pass the request. The agent's and the tier's config are resolved once, here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import asyncpg

from ledgers import graph, tool_flows
from ledgers.introspection import Compared, RecentLine, WakeDiff
from ledgers.memory_ledger import CanaryResult
from ledgers.vocab import Tier, Trigger
from memory.repo import MemoryRepo
from surfaces.context import ToolSettings
from surfaces.conversation import Conversation
from surfaces.registry import Tool
from wake.config import AgentConfig, Config, TierConfig
from wake.stores import Stores, lease

RowWrite = Callable[[asyncpg.Connection], Awaitable[None]]


@dataclass(frozen=True, kw_only=True)
class WakeRequest:
    """One wake asked for (step 1): by the schedule, a catch-up, an operator, or an escalation.

    `wake_id` is chosen before the wake starts, so a caller (the daemon answering `wake trigger`)
    can name it at once; `fence` is the lease's token, None for a wake that holds no lease."""

    agent_id: str
    tier: Tier
    trigger: Trigger = Trigger.manual
    scheduled_for: dt.datetime | None = None
    wake_id: uuid.UUID = field(default_factory=uuid.uuid4)
    fence: int | None = None
    cause: str | None = None  # why an escalated wake runs: the whisper and its gate reason

    def __post_init__(self) -> None:
        object.__setattr__(self, "tier", Tier(self.tier))
        object.__setattr__(self, "trigger", Trigger(self.trigger))

    def fenced(self, fence: int) -> WakeRequest:
        return dataclasses.replace(self, fence=fence)


@dataclass(frozen=True, kw_only=True)
class MemoryState:
    """The agent's memory as the wake found it, before its arrival (docs/memory.md)."""

    enabled: bool = False  # agents.<id>.memory.enabled
    repo: MemoryRepo | None = None  # None: memory is off, or the repository could not be opened
    canary: CanaryResult | None = None  # None: not audited (memory off, a dry run, or the canary failed)
    error: str | None = None  # why the canary could not run
    halt: str | None = None  # why this wake makes no model call and binds no writing tool: "cloister ..."


@dataclass(frozen=True, kw_only=True)
class WakeContext:
    """What sources and tools see of the wake they run in (a `surfaces.context.ToolContext`)."""

    config: Config
    stores: Stores
    request: WakeRequest
    now: dt.datetime
    binding: tuple[Tool, ...] = ()
    tool_hashes: Mapping[str, str] = field(default_factory=dict)
    previous: Compared | None = None  # the agent's previous settled wake (step 7 compares with it)
    previous_tier: Compared | None = None  # the tier's
    # the agent's newest wakes, newest first, read with the previous ones when the tier shows them
    # (the recent-wakes block); None: not read, the block reads them itself
    recent: tuple[RecentLine, ...] | None = None
    # the diff against both (step 7), set once the direct blocks are in: the derived sources (the
    # binding diff) and the gate see it; None before
    diff: WakeDiff | None = None
    flow_change: tool_flows.Change | None = None  # how the tier's toxic flow changed since its last wake (the binding diff says)
    # The model loop's conversation, in the context it hands to tools (None in sources and outside the loop)
    conversation: Conversation | None = None
    # Writes a source leaves for the wake's own row (they name the wake): run by the cycle in the
    # fenced transaction that inserts the row, each in its own savepoint; never on a dry run.
    with_row: list[RowWrite] = field(default_factory=list)
    memory_state: MemoryState = MemoryState()
    # a dry run records nothing: sources that do work worth a row (a probe) run it, store nothing,
    # and name it in `unstored` (shared by every copy of this context), which the dry run prints
    dry_run: bool = False
    unstored: list[str] = field(default_factory=list)
    agent: AgentConfig = field(init=False)
    tier_config: TierConfig = field(init=False)
    settings: ToolSettings = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "agent", self.config.agents[self.request.agent_id])
        object.__setattr__(self, "tier_config", self.config.tier(self.request.agent_id, self.request.tier))
        object.__setattr__(self, "settings", self.config.tool_settings())

    @property
    def agent_id(self) -> str:
        return self.request.agent_id

    @property
    def tier(self) -> Tier:
        return self.request.tier

    @property
    def trigger(self) -> Trigger:
        return self.request.trigger

    @property
    def scheduled_for(self) -> dt.datetime | None:
        return self.request.scheduled_for

    @property
    def wake_id(self) -> uuid.UUID:
        return self.request.wake_id

    @property
    def fence(self) -> int | None:
        return self.request.fence

    @property
    def timezone(self) -> str:
        return self.agent.timezone

    @property
    def graph(self) -> graph.Graph | None:
        return self.stores.graph

    @property
    def memory(self) -> MemoryRepo | None:
        return self.memory_state.repo

    def read(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection that sees only this agent's rows (the tool role, docs/isolation.md)."""
        return self.stores.scoped_conn(self.agent_id)

    def write(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """`async with ctx.write() as conn:` — a transaction that writes only while this wake's
        fence is the agent's newest (raises `ledgers.errors.StaleFence` otherwise). Every write a
        wake, a source or a tool makes to PostgreSQL goes through here. Its connection, like
        `read()`'s, sees and writes only this agent's rows."""
        return lease.fenced(self.stores, self.agent_id, self.fence, scoped=True)

    def harness_write(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """The harness's own fenced transaction on the owner's login, for a write into a table no
        agent owns (the transcript's texts go to the shared, content-addressed `manifest_contents`)
        or into the control plane (the wake's row, a queued approval: docs/isolation.md), which the
        tool role may not write. Not for tool code: a tool writes through `write()`."""
        return lease.fenced(self.stores, self.agent_id, self.fence)
