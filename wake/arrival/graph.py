"""The graph arrival block (stable cache tier): the entities around the agent's recent facts,
open commitments and last actions, one hop out, bounded by a node cap and a character cap.

Typed states (docs/design.md, "Typed retrieval state"): `disabled` when Neo4j is not configured, `empty`
when the graph answered and holds no anchor, `failed` ("could not check: <reason>") when it did
not answer. The caps are `neo4j.block_max_nodes` and `neo4j.block_max_chars`; the totals shown
come from COUNT queries, so "12 of 30" is exact.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Awaitable

from ledgers import graph
from untrusted import spotlight
from wake import clock
from wake.arrival.engine import Found
from wake.context import WakeContext
from wake.errors import Disabled

HEADER = "Your graph, one hop around recent facts, open commitments and last actions"
EMPTY = "No entity in your graph is linked to a recent fact, an open commitment or a last action."
# Links fetched per node of the cap: enough to fill the cap without reading the whole graph.
EDGES_PER_NODE = 8
# The longest footer ("… N more entities and at least M more links not shown (character cap C).").
FOOTER_ROOM = 100


ENTITY_CHARS = 120


def _entity(name: str, kind: str | None, marks: spotlight.Marks) -> str:
    """An entity's name (stored text: marked data) and kind."""
    return f"{marks.span(name, ENTITY_CHARS)} ({marks.span(kind, ENTITY_CHARS)})" if kind else marks.span(name, ENTITY_CHARS)


def _anchor_line(a: graph.Anchor, zone: zoneinfo.ZoneInfo, marks: spotlight.Marks) -> str:
    when = f", last {clock.day(a.last, zone)}" if a.last else ""
    return f"- {_entity(a.name, a.kind, marks)}: {spotlight.neutral(', '.join(a.roles))}{when}"


def _edge_line(e: graph.Edge, marks: spotlight.Marks) -> str:
    rel = marks.span(e.rel, ENTITY_CHARS)
    arrow = f"-[{rel}]->" if e.outgoing else f"<-[{rel}]-"
    return f"  {arrow} {_entity(e.name, e.kind, marks)}"


def _edges_once(v: graph.View) -> dict[str, list[graph.Edge]]:
    """Each anchor's links, a link between two anchors kept once, under the newer anchor."""
    edges_by_anchor: dict[str, list[graph.Edge]] = {}
    for e in v.edges:
        edges_by_anchor.setdefault(e.anchor, []).append(e)
    seen: set[tuple[str, str, str]] = set()
    for a in v.anchors:
        unique = []
        for e in edges_by_anchor.get(a.name, []):
            key = (e.anchor, e.rel, e.name) if e.outgoing else (e.name, e.rel, e.anchor)
            if key not in seen:
                seen.add(key)
                unique.append(e)
        edges_by_anchor[a.name] = unique
    return edges_by_anchor


def render(v: graph.View, *, max_nodes: int, max_chars: int, timezone: str, marks: spotlight.Marks = spotlight.OPERATOR) -> tuple[str, int]:
    """The block text and the number of entities it shows.

    The newest anchor first, each followed by its links; an entity counts once toward the node
    cap; lines stop at whichever cap is hit first, and the last line says what was left out.
    """
    zone = zoneinfo.ZoneInfo(timezone)
    total_nodes = v.anchor_total + v.neighbour_total
    shown: set[str] = set()
    lines: list[str] = []
    header_room = len(f"{HEADER}; {total_nodes} of {total_nodes} entities shown:") + 1
    budget = max_chars - header_room - FOOTER_ROOM
    used = 0
    cap_hit: str | None = None
    edges_by_anchor = _edges_once(v)
    for a in v.anchors:
        candidates = [(_anchor_line(a, zone, marks), a.name)] + [(_edge_line(e, marks), e.name) for e in edges_by_anchor.get(a.name, [])]
        for line, node in candidates:
            if node not in shown and len(shown) >= max_nodes:
                cap_hit = cap_hit or f"node cap {max_nodes}"
                continue
            if used + len(line) + 1 > budget:
                cap_hit = cap_hit or f"character cap {max_chars}"
                break
            lines.append(line)
            used += len(line) + 1
            shown.add(node)
        if cap_hit and cap_hit.startswith("character"):
            break
    header = f"{HEADER}; {len(shown)} of {total_nodes} entities shown:"
    hidden_links = len(v.edges) - sum(1 for line in lines if line.startswith("  "))
    if cap_hit or len(shown) < total_nodes:
        reason = cap_hit or f"node cap {max_nodes}"
        more = [f"{total_nodes - len(shown)} more entities"] if total_nodes > len(shown) else []
        if hidden_links > 0:
            more.append(f"at least {hidden_links} more links")
        lines.append(f"… {' and '.join(more) or 'more'} not shown ({reason}).")
    return "\n".join([header, *lines]), len(shown)


def block(ctx: WakeContext) -> Awaitable[Found]:
    """The `graph` arrival source: disabled at once without Neo4j, else its read."""
    g = ctx.graph
    if g is None:
        raise Disabled("neo4j is not configured (set NEO4J_URI or neo4j.uri)")
    return _read(ctx, g)


async def _read(ctx: WakeContext, g: graph.Graph) -> Found:
    conf = ctx.config.neo4j
    since = ctx.now - dt.timedelta(hours=conf.block_recent_h)
    v = await graph.view(g, ctx.agent_id, since=since, max_anchors=conf.block_max_nodes, max_edges=conf.block_max_nodes * EDGES_PER_NODE)
    if not v.anchors:
        return Found(text=EMPTY, rows=0)
    text, shown = render(v, max_nodes=conf.block_max_nodes, max_chars=conf.block_max_chars, timezone=ctx.timezone,
                         marks=spotlight.for_agent(ctx.agent_id))
    return Found(text=text, rows=shown)
