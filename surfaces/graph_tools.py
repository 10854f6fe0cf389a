"""The graph tools: `graph_neighbors` reads; `graph_link` and `graph_unlink` write, fenced.

They exist only when Neo4j is configured (`surfaces.loader.build(graph=True)`), so no wake holds
a graph tool that cannot work, and configuring Neo4j shows up in the next wake's binding diff.

A write runs inside the wake's fenced PostgreSQL transaction (`ctx.write()`: refused when a newer
lease holder exists) and in a Neo4j transaction that checks the agent's Fence node (refused when
the graph has seen a newer fence). Either refusal writes nothing and returns an error. Neo4j
unreachable or timing out, or a bad argument, is a tool error too, never an exception.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from ledgers import graph
from ledgers.errors import GraphStaleFence, StaleFence
from surfaces.context import ToolContext, graph_write
from surfaces.registry import Tool, tool

log = structlog.get_logger("surfaces.graph_tools")

_NAME = {"type": "string", "minLength": 1, "maxLength": graph.MAX_NAME_CHARS}
_REL = {"type": "string", "pattern": graph.RELATION.pattern, "description": "Relationship type in UPPER_SNAKE_CASE, e.g. WORKS_ON."}
_KIND = {"type": "string", "minLength": 1, "maxLength": 64, "description": "What the entity is (person, project, place...), set when it is created."}
_EDGE: dict[str, Any] = {
    "type": "object",
    "properties": {"source": _NAME, "relation": _REL, "target": _NAME},
    "required": ["source", "relation", "target"],
    "additionalProperties": False,
}


async def _answer(ctx: ToolContext, name: str, call: Callable[[graph.Graph], Awaitable[dict[str, object]]]) -> dict[str, object]:
    g = ctx.graph
    if g is None:
        return {"error": "the graph is not configured (no neo4j.uri)"}
    try:
        return await call(g)
    except ValueError as exc:
        return {"error": f"invalid argument: {exc}"}
    except StaleFence as exc:
        if isinstance(exc, GraphStaleFence):  # ctx.write() logged PostgreSQL's own refusal
            log.warning("fence.stale", store="neo4j", tool=name, agent=ctx.agent_id, fence=exc.fence, newest=exc.newest)
        return {"error": f"refused, nothing was written: {exc}"}
    except graph.GraphUnavailable as exc:
        log.warning("tool.error", tool=name, agent=ctx.agent_id, error=str(exc))
        return {"error": f"could not reach the graph: {exc}"}
    except graph.refused() as exc:
        log.warning("tool.error", tool=name, agent=ctx.agent_id, error=str(exc))
        return {"error": graph.refusal(exc)}


@tool(
    name="graph_neighbors",
    description="Entities one hop from a named entity in your graph, with the relationship types and directions, newest first.",
    parameters={
        "type": "object",
        "properties": {"name": _NAME, "relation": {**_REL, "description": "Only relationships of this type."}},
        "required": ["name"],
        "additionalProperties": False,
    },
    surfaces={"chat", "wake"},
)
async def graph_neighbors(ctx: ToolContext, name: str, relation: str | None = None) -> dict[str, object]:
    limit = ctx.settings.graph_neighbors_max

    async def call(g: graph.Graph) -> dict[str, object]:
        return neighbors_json(await graph.neighbors(g, ctx.agent_id, name, rel=relation, limit=limit))

    return await _answer(ctx, "graph_neighbors", call)


def neighbors_json(n: graph.Neighbors) -> dict[str, object]:
    """The tool's answer: the entity's kind only when it was found."""
    if not n.found:
        return {"entity": n.entity, "found": False, "total": 0, "neighbors": []}
    return {
        "entity": n.entity, "kind": n.kind, "found": True, "total": n.total,
        "neighbors": [
            {"rel": e.rel, "direction": "out" if e.outgoing else "in", "name": e.name, "kind": e.kind,
             "since": e.since.isoformat() if e.since else None}
            for e in n.neighbors
        ],
    }


@tool(
    name="graph_link",
    description="Link two entities in your graph (source -[RELATION]-> target), creating either when missing. Idempotent.",
    parameters={
        "type": "object",
        "properties": {**_EDGE["properties"], "source_kind": _KIND, "target_kind": _KIND},
        "required": _EDGE["required"],
        "additionalProperties": False,
    },
    surfaces={"wake.surface", "wake.full"},
    mutates=True,
)
async def graph_link(
    ctx: ToolContext, source: str, relation: str, target: str, source_kind: str | None = None, target_kind: str | None = None
) -> dict[str, object]:
    async def call(g: graph.Graph) -> dict[str, object]:
        async with ctx.write():
            created = await graph.link(
                g, graph_write(ctx, f"graph_link:{ctx.wake_id}"), source, relation, target, source_kind=source_kind, target_kind=target_kind
            )
        return {"linked": True, "created": created, "source": source.strip(), "relation": relation, "target": target.strip()}

    return await _answer(ctx, "graph_link", call)


@tool(
    name="graph_unlink",
    description="Remove the relationship source -[RELATION]-> target from your graph; the entities stay.",
    parameters=_EDGE,
    surfaces={"wake.surface", "wake.full"},
    mutates=True,
)
async def graph_unlink(ctx: ToolContext, source: str, relation: str, target: str) -> dict[str, object]:
    async def call(g: graph.Graph) -> dict[str, object]:
        async with ctx.write():
            removed = await graph.unlink(g, graph_write(ctx, f"graph_unlink:{ctx.wake_id}"), source, relation, target)
        return {"removed": removed, "source": source.strip(), "relation": relation, "target": target.strip()}

    return await _answer(ctx, "graph_unlink", call)


TOOLS: tuple[Tool, ...] = (graph_neighbors, graph_link, graph_unlink)
