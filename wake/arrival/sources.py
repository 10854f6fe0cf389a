"""The built-in arrival sources. Each is a function of the wake context that answers at once or
returns what to await (`wake.arrival.engine.SourceFn`): those that read only what the wake holds
already answer at once.

Later ledgers add their sources here through the same interface (`arrival.Source`).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Awaitable

from ledgers import introspection
from ledgers.vocab import Status
from wake.arrival import falsifiers, graph, memory_blocks, posture, records, settled, sql_sources
from wake.arrival.engine import CacheTier, Found, Source
from wake.clock import stamp
from wake.config import Config
from wake.context import WakeContext
from wake.witness import diff

RECENT_WAKES = 5
# What a line leaves out is said once here: the date of today's wakes, and the tool count where it
# is the one you hold now (the clock block's); both would otherwise repeat on every line.
RECENT_WAKES_HEAD = "Your last wakes, newest first (today unless dated; {held} tools, as now, unless stated):"


def identity(ctx: WakeContext) -> Found:
    paths = ctx.config.persona_paths(ctx.agent_id)
    if not paths:
        return Found(text="No persona files are configured for this agent.", rows=0)
    texts = [path.read_text(encoding="utf-8").strip() for path in paths]
    return Found(text="\n\n".join(texts), rows=len(texts))


def _local_time(at: dt.datetime, zone: zoneinfo.ZoneInfo, today: dt.date) -> str:
    """`HH:MM` for a time on `today` (the wake's local date, which the clock block states), else
    `YYYY-MM-DD HH:MM`: a date repeated on every line of a block is bytes that move every day."""
    local = at.astimezone(zone)
    return f"{local:%H:%M}" if local.date() == today else stamp(at, zone)


def clock(ctx: WakeContext) -> Found:
    zone = zoneinfo.ZoneInfo(ctx.timezone)
    local = ctx.now.astimezone(zone)
    slot = f"; slot {_local_time(ctx.scheduled_for, zone, local.date())}" if ctx.scheduled_for else ""
    # What stays the same from wake to wake first, then the time: the bytes that move come last.
    text = (
        f"This is a {ctx.tier} wake, trigger {ctx.trigger}. Nobody prompted it; you hold {len(ctx.binding)} tools.\n"
        f"Now: {local:%A %Y-%m-%d %H:%M:%S %Z} ({ctx.timezone}){slot}."
    )
    return Found(text=text, rows=1)


def recent_wakes(ctx: WakeContext) -> Found | Awaitable[Found]:
    """The agent's newest wakes: at once from the rows the wake read with its previous wakes (no
    round trip), else after reading them."""
    if ctx.recent is not None:
        return _recent_block(ctx, list(ctx.recent[:RECENT_WAKES]))
    return _recent_read(ctx)


async def _recent_read(ctx: WakeContext) -> Found:
    async with ctx.stores.pg_conn() as conn:
        rows = await introspection.recent(conn, agent_id=ctx.agent_id, limit=RECENT_WAKES)
    return _recent_block(ctx, [introspection.RecentLine.from_row(r.columns()) for r in rows])


def _recent_block(ctx: WakeContext, rows: list[introspection.RecentLine]) -> Found:
    if not rows:
        return Found(text="No earlier wakes are recorded.", rows=0)
    zone = zoneinfo.ZoneInfo(ctx.timezone)
    today = ctx.now.astimezone(zone).date()
    held = len(ctx.binding)
    lines = [
        f"- {_local_time(r.started_at, zone, today)} {r.tier} ({r.trigger}) {str(r.wake_id)[:8]}: {r.status}{_why(r)}"
        + (f", {r.active_tools_count} tools" if r.active_tools_count != held else "") + (f" — {r.error}" if r.error else "")
        for r in rows
    ]
    # The header carries no count (the lines are the count), so it stays byte-identical as the list fills.
    return Found(text=RECENT_WAKES_HEAD.format(held=held) + "\n" + "\n".join(lines), rows=len(rows))


def _why(row: introspection.RecentLine) -> str:
    """Why a wake that did not complete ended so, in a word: its stop reason (`gate`,
    `nothing_to_report`, `precheck`, ...), else the first word of its note's reason (`paused`,
    `busy`, `inactive_hours`); nothing for a completed one. Two quiet whispers then read apart."""
    if row.status == Status.completed:
        return ""
    if row.stop_reason:
        return f" ({row.stop_reason})"
    prefix = f"{row.status}: "
    note = row.note or ""
    return f" ({note.removeprefix(prefix).split(':', 1)[0].strip()})" if note.startswith(prefix) else ""


def binding_diff(ctx: WakeContext) -> Found:
    if ctx.diff is None:
        raise RuntimeError("the binding diff runs after the diff is computed (a derived source)")
    return Found(text=diff.render(ctx.diff, ctx.tier, ctx.timezone, ctx.now, flow=ctx.flow_change), rows=0 if ctx.diff.agent.first else 1)


BUILTIN: dict[str, Source] = {
    s.name: s
    for s in (
        Source(name="identity", cache_tier=CacheTier.static, fn=identity),
        Source(name="memory", cache_tier=CacheTier.stable, fn=memory_blocks.memory_tree),
        Source(name="cloister", cache_tier=CacheTier.volatile, fn=memory_blocks.cloister),
        Source(name="graph", cache_tier=CacheTier.stable, fn=graph.block),
        Source(name="recent_wakes", cache_tier=CacheTier.session, fn=recent_wakes, changes_every_wake=True, moves_with_clock=True),
        Source(name="clock", cache_tier=CacheTier.volatile, fn=clock, changes_every_wake=True, moves_with_clock=True),
        Source(name="due_falsifiers", cache_tier=CacheTier.volatile, fn=falsifiers.due_falsifiers),
        Source(name=diff.DIFF_BLOCK, cache_tier=CacheTier.volatile, fn=binding_diff, derived=True, changes_every_wake=True),
        Source(name="living_summaries", cache_tier=CacheTier.stable, fn=records.living_summaries),
        Source(name="provenance_facts", cache_tier=CacheTier.session, fn=records.provenance_facts),
        # Every wake that thinks writes its final text here, so the block changes on each of them:
        # the agent's own words are not news, and comparing them would keep the whisper gate open forever.
        Source(name="daybook", cache_tier=CacheTier.session, fn=records.recent_daybook, changes_every_wake=True),
        Source(name="settled_facts", cache_tier=CacheTier.volatile, fn=settled.settled_facts),
        # Both change with the clock or with the agent's own doing: not news for the whisper gate.
        Source(name="posture", cache_tier=CacheTier.volatile, fn=posture.block, changes_every_wake=True, moves_with_clock=True),
        Source(name="context_audit", cache_tier=CacheTier.session, fn=posture.audit, changes_every_wake=True),
    )
}


def resolve(config: Config, name: str) -> Source:
    """A built-in source, else the operator's `[sql_sources.<name>]` (config validation has
    already refused any other name)."""
    if name in BUILTIN:
        return BUILTIN[name]
    return sql_sources.source(name, config.sql_sources[name])
