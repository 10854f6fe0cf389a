"""What a tool sees of the wake it runs in: the public surface for tool authors.

A tool handler is `async def handler(ctx: ToolContext, **arguments)`. The harness passes its
own wake context, which satisfies this Protocol; tests may pass anything that does. Every
PostgreSQL write goes through `ctx.write()`, a transaction that commits only while the wake's
fence is the agent's newest (`ledgers.errors.StaleFence` otherwise); reads go through
`ctx.read()`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the graph driver is imported only where a graph is configured
    import asyncpg

    from ledgers import graph
    from memory.repo import MemoryRepo
    from surfaces.conversation import Conversation

__all__ = ["RecallSettings", "ToolContext", "ToolSettings", "graph_write"]


@dataclass(frozen=True, kw_only=True)
class RecallSettings:
    """One agent's `recall` tool (`agents.<id>.recall`, docs/recall.md)."""

    dictionary: str = "simple"  # the text search configuration: no stemming, any language
    continuing_candidates: int = 24  # a continuing topic fetches this many by rank...
    continuing_cap: int = 6  # ...and projects at most this many, newest first
    ordinary_candidates: int = 8  # any other request fetches this many...
    ordinary_cap: int = 3  # ...and projects at most this many, best first
    recent_entries: int = 3  # the newest daybook entries whose terms make a request continuing


@dataclass(frozen=True, kw_only=True)
class ToolSettings:
    """The few configured values the built-in tools read, resolved once per config."""

    falsifier_maturity_days: int = 3
    graph_neighbors_max: int = 25
    probe_roots: tuple[Path, ...] = ()
    probe_max_file_bytes: int = 1_048_576
    recall: Mapping[str, RecallSettings] = field(default_factory=dict)  # by agent id
    with_workspace: frozenset[str] = frozenset()  # agents whose facts are checked against a workspace
    # each such agent's workspace (its root, its HEAD TTL): the fact tools compare anchor names with the names it defines
    workspaces: Mapping[str, tuple[Path, float]] = field(default_factory=dict)

    def recall_of(self, agent_id: str) -> RecallSettings:
        return self.recall.get(agent_id) or RecallSettings()


class ToolContext(Protocol):
    """The wake a tool call runs in."""

    @property
    def agent_id(self) -> str: ...

    @property
    def tier(self) -> str: ...

    @property
    def wake_id(self) -> uuid.UUID: ...

    @property
    def fence(self) -> int | None:
        """The wake's fencing token; None for a wake that holds no lease (a dry run)."""

    @property
    def now(self) -> dt.datetime:
        """When the wake started (timezone-aware); the time every write records."""

    @property
    def timezone(self) -> str:
        """The agent's IANA zone."""

    @property
    def graph(self) -> graph.Graph | None:
        """The agent's entity graph, or None when Neo4j is not configured."""

    @property
    def settings(self) -> ToolSettings: ...

    @property
    def conversation(self) -> Conversation | None:
        """The wake's conversation, as the model loop holds it; None outside the loop."""

    @property
    def memory(self) -> MemoryRepo | None:
        """The agent's memory repository, opened (and audited) at the wake's start; None when
        memory is off for the agent or the repository could not be opened."""

    def read(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """A pooled connection for reading."""

    def write(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """A transaction that writes only while this wake's fence is the agent's newest."""

    def harness_write(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """The harness's own fenced transaction, on the owner's login: for the harness's machinery
        a builtin tool runs (the Cloister canary after a memory write writes the findings; the
        context tools record a decline or a setting they checked in the context audit: both are
        the control plane, docs/isolation.md). Not for a tools module's own writes."""


def graph_write(ctx: ToolContext, ref: str) -> graph.Write:
    """A graph write made by the wake `ctx`, under its fence (`ref` names what wrote it)."""
    from ledgers import graph

    return graph.Write(agent_id=ctx.agent_id, fence=ctx.fence, now=ctx.now, wake_id=ctx.wake_id, ref=ref)
