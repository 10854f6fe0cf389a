"""Graph anchors for the ledger tools: a fact or a commitment marks its entity in the graph.

The PostgreSQL row is the record; the anchor is what lets the `graph` block show it. Each call
here runs inside the tool's fenced PostgreSQL transaction (`ctx.write()`, as the graph tools do),
so a stale fence, PostgreSQL's or the graph's own Fence node's, raises `StaleFence` and neither
store keeps anything. Any other graph failure (unreachable, timed out, a refused query) is caught:
the row still commits, `graph.anchor_failed` is logged and the tool's result says
`graph: "could not anchor: <reason>"`. Without Neo4j nothing is tried and the result has no
`graph` field (docs/graph.md, "Anchors from the ledger tools").
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import structlog

from ledgers import graph
from ledgers.errors import GraphStaleFence
from surfaces.context import ToolContext, graph_write

log = structlog.get_logger("surfaces.graph_anchors")

ABOUT = {
    "type": "string", "minLength": 1, "maxLength": graph.MAX_NAME_CHARS,
    "description": "The entity this is about in your graph (a person, project, place...).",
}
ABOUT_KIND = {
    "type": "string", "minLength": 1, "maxLength": 64,
    "description": "What the `about` entity is (person, project...), set when it is created.",
}


def about(value: str | None) -> str | None:
    """A checked entity name, before anything is written (a blank one is the caller's error)."""
    return None if value is None else graph.entity_name(value, "about")


async def _attempt(ctx: ToolContext, tool: str, ref: str, call: Callable[[graph.Graph], Awaitable[str]]) -> dict[str, str]:
    g = ctx.graph
    if g is None:
        return {}
    try:
        return {"graph": await call(g)}
    except GraphStaleFence as exc:  # ctx.write() rolls the row back; the model loop stops the wake
        log.warning("fence.stale", store="neo4j", tool=tool, agent=ctx.agent_id, fence=exc.fence, newest=exc.newest)
        raise
    except graph.GraphUnavailable as exc:
        reason = str(exc)
    except graph.refused() as exc:
        reason = graph.refusal(exc)
    log.warning("graph.anchor_failed", tool=tool, agent=ctx.agent_id, ref=ref, error=reason)
    return {"graph": f"could not anchor: {reason}"}


def _skipped(ctx: ToolContext, reason: str) -> dict[str, str]:
    return {} if ctx.graph is None else {"graph": f"not anchored: {reason}"}


async def fact(
    ctx: ToolContext, tool: str, *, fact_id: uuid.UUID, status: str, name: str | None, kind: str | None,
    supersedes_id: uuid.UUID | None = None, key: str,
) -> dict[str, str]:
    """A FACT anchor (ref `fact:<id>`) on `name`; without one, on the entity the superseded fact
    anchored, else on the fact's key. An unverified fact stays out of the graph as it stays out of
    arrivals."""
    if status != "active":
        return _skipped(ctx, f"the fact is {status}")
    ref = f"fact:{fact_id}"

    async def call(g: graph.Graph) -> str:
        subject, subject_kind = name, kind
        if subject is None and supersedes_id is not None:
            subject, subject_kind = await graph.fact_subject(g, ctx.agent_id, f"fact:{supersedes_id}") or (None, None)
            subject_kind = kind or subject_kind
        subject = subject or key
        await graph.anchor(g, graph_write(ctx, ref), "FACT", subject, kind=subject_kind, at=ctx.now)
        return f"anchored FACT on {subject!r}"

    return await _attempt(ctx, tool, ref, call)


async def commitment(ctx: ToolContext, tool: str, *, commitment_id: int, name: str | None, kind: str | None) -> dict[str, str]:
    """An open COMMITMENT anchor (ref `commitment:<id>`) on `name`; none without one."""
    if name is None:
        return _skipped(ctx, "no `about` entity given")
    ref = f"commitment:{commitment_id}"

    async def call(g: graph.Graph) -> str:
        await graph.anchor(g, graph_write(ctx, ref), "COMMITMENT", name, kind=kind, at=ctx.now, open_=True)
        return f"anchored open COMMITMENT on {name!r}"

    return await _attempt(ctx, tool, ref, call)


async def close_commitment(ctx: ToolContext, tool: str, *, commitment_id: int) -> dict[str, str]:
    """The commitment's anchors get `open = false`: it no longer anchors the block."""
    ref = f"commitment:{commitment_id}"

    async def call(g: graph.Graph) -> str:
        names = await graph.close_commitment(g, graph_write(ctx, ref))
        return f"closed COMMITMENT anchor on {', '.join(repr(n) for n in names)}" if names else "no COMMITMENT anchor to close"

    return await _attempt(ctx, tool, ref, call)
