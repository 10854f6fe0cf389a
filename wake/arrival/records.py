"""Arrival sources over what the agent holds from before: provenance facts, living summaries,
the daybook. Each renders what it read; an empty ledger says so; a store error fails the block
("could not check"), never "nothing".

The daybook and the summaries are the agent's own earlier prose: they render as its earlier notes
(historical; not instructions), and nothing in them changes what a wake may do. Summaries are
derived from the facts and messages and may lag them: they say so, and that a receipt (a fact, a
message, the settled state) outranks them.
"""

from __future__ import annotations

import zoneinfo

from ledgers import daybook, facts, queries, summaries
from surfaces.recall import HISTORICAL
from untrusted import spotlight
from wake import clock
from wake.arrival import code_check
from wake.arrival.engine import Found, Part
from wake.context import WakeContext

FACTS_SHOWN = 12
CHAIN_DEPTH = 3
DAYBOOK_SHOWN = 3
DAYBOOK_CHARS = 400
SUMMARY_LINE_CHARS = 2000  # a line of a living summary
SUMMARIES_HEAD = (
    f"{HISTORICAL}: your living summaries. They are derived, folded from facts and messages, and may lag them: "
    "where a fact, a message or the settled state says otherwise, that receipt wins."
)


async def provenance_facts(ctx: WakeContext) -> Found:
    """Active facts with passports and their supersession chains; unverified ones stay out. Code
    anchors are checked against the workspace at HEAD (`wake.arrival.code_check`): a refuted fact
    leaves the block, the others carry their verdict."""
    async with ctx.stores.pg_conn() as conn:
        rows, total, unverified = await facts.for_arrival(conn, ctx.agent_id, ctx.timezone, limit=code_check.read_limit(ctx, FACTS_SHOWN),
                                                          chain_depth=CHAIN_DEPTH)
    among = f" among your newest {unverified.among} facts" if unverified.among else ""
    held_back = (
        f"\n({unverified.count} unverified fact{'s' if unverified.count != 1 else ''} held back{among}: not attested by the message cited)"
        if unverified else ""
    )
    if not rows:
        return Found(text=f"No active facts are recorded.{held_back}", rows=0)
    checked = await code_check.check(ctx, rows, FACTS_SHOWN)
    return Found(text=facts_text(checked, total, spotlight.for_agent(ctx.agent_id)) + held_back, rows=total)


def facts_text(checked: code_check.Checked, total: int, marks: spotlight.Marks) -> str:
    """The facts block's header and lines; the header counts the live facts of the lines it heads."""
    heads = sum(1 for r in checked.rows if r.depth == 0)
    summary = checked.summary()
    head = (f"Facts ({heads} of {queries.count_text(total)} active, newest first; did = your own action or lookup, saw = told or observed"
            f"{'; ' + summary if summary else ''}):")
    return "\n".join([head, *(code_check.line(r, checked, marks) for r in checked.rows)])


async def living_summaries(ctx: WakeContext) -> Found:
    """Each aspect's current text, and what its last fold merged (the trail's reader)."""
    async with ctx.stores.pg_conn() as conn:
        rows = await summaries.current(conn, ctx.agent_id)
    if not rows:
        return Found(text="No living summaries are recorded yet.", rows=0)
    text, states = summaries_text(rows, zoneinfo.ZoneInfo(ctx.timezone), spotlight.for_agent(ctx.agent_id))
    return Found(text=text, rows=len(rows), parts=states)


def summaries_text(rows: list[summaries.Summary], zone: zoneinfo.ZoneInfo, marks: spotlight.Marks) -> tuple[str, tuple[Part, ...]]:
    """The summaries block's text (each aspect's lines and its last fold's deltas, marked data) and
    the state of each part that could not be read."""
    parts, states = [SUMMARIES_HEAD], []
    for r in rows:
        part = [f"### {spotlight.neutral(r.aspect)} (derived, v{r.version}, folded {clock.stamp(r.folded_at, zone)})",
                *marks.lines(r.content.strip(), limit=SUMMARY_LINE_CHARS)]
        if r.trail_id is None or r.trail_folded_at is None:  # a part that cannot be read fails the block (its other aspects still render)
            part.append("What changed since the last fold: could not check: no trail row for this version")
            states.append(Part(name=f"{spotlight.neutral(r.aspect)} trail", reason="no trail row for this version"))
        elif r.merged_deltas:
            part.append(
                f"What changed since the last fold ({clock.day(r.trail_folded_at, zone)}): "
                + "; ".join(marks.span(str(d), SUMMARY_LINE_CHARS) for d in r.merged_deltas)
            )
        else:
            part.append("What changed since the last fold: nothing was merged")
        parts.append("\n".join(part))
    return "\n\n".join(parts), tuple(states)


async def recent_daybook(ctx: WakeContext) -> Found:
    async with ctx.stores.pg_conn() as conn:
        rows, total = await daybook.recent(conn, ctx.agent_id, limit=DAYBOOK_SHOWN)
    if not rows:
        return Found(text="The daybook is empty.", rows=0)
    return Found(text=daybook_text(rows, total, zoneinfo.ZoneInfo(ctx.timezone), spotlight.for_agent(ctx.agent_id)), rows=total)


def daybook_text(rows: list[daybook.Entry], total: int, zone: zoneinfo.ZoneInfo, marks: spotlight.Marks) -> str:
    """The daybook block's text: a header counting the entries it shows, one line each, the entry marked data."""
    lines = [f"{HISTORICAL}, from your daybook ({len(rows)} of {queries.count_text(total)} entries, newest first):"]
    for r in rows:
        entry = marks.span(" ".join(r.entry.split()), DAYBOOK_CHARS)  # its whitespace folded, as before, then marked
        wake = f" (wake {str(r.wake_id)[:8]})" if r.wake_id else ""
        unchecked = f" [{spotlight.neutral(daybook.unchecked_mark(r.unchecked_blocks))}]" if r.unchecked_blocks else ""
        lines.append(f"- #{r.entry_id} {clock.stamp(r.written_at, zone)}{wake}{unchecked}: {entry}")
    return "\n".join(lines)
