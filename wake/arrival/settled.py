"""The settled-facts arrival block: "[Settled Facts & Recent Ground Truth]" (docs/design.md, "Arrival blocks").

At most 8 lines, one join in one place, delivered before the first token:

1. the latest settled state (the `settled_state` table, or the operator's
   `agents.<id>.settled_state_source`);
2. open commitments: the three newest, with the total ("3 of 6") from a COUNT (bounded: "3 of
   more than 1000" past `ledgers.queries.COUNT_CAP`);
3. the three newest retractions;
4. confirmed mutating actions of the last 48 hours across surfaces (`last_actions`).

DATE columns are formatted in SQL (`to_char`), so neither the connection's timezone nor the
agent's can move a day. A part that cannot be read says "could not check: <why>" on its own line;
the others still render, and the block's state is the worst part's: one failed part fails it
(`Found.parts` carries each part's state to the row).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import asyncpg

from ledgers import actions, commitments, queries, retractions, settled
from untrusted import spotlight
from wake import clock, logs
from wake.arrival import sql_sources
from wake.arrival.engine import Found, Part
from wake.context import WakeContext
from wake.errors import SqlSourceError

HEADER = "[Settled Facts & Recent Ground Truth]"
MAX_LINES = 8
SHOWN = 3
ACTIONS_WINDOW = dt.timedelta(hours=48)

async def _state(ctx: WakeContext, conn: asyncpg.Connection) -> tuple[str, int]:
    name = ctx.config.agents[ctx.agent_id].settled_state_source
    if name is not None:
        conf = ctx.config.sql_sources[name]
        rows, _ = await sql_sources.fetch(conn, name, conf, ctx)
        if not rows:
            return f"Settled state: none recorded ({name})", 0
        return f"Settled state: {sql_sources.render_row(name, conf, rows[0], spotlight.for_agent(ctx.agent_id))}", 1
    return state_line(await settled.latest_state(conn, ctx.agent_id), spotlight.for_agent(ctx.agent_id))


def state_line(row: settled.State | None, marks: spotlight.Marks) -> tuple[str, int]:
    if row is None:
        return "Settled state: none recorded", 0
    return f"Settled state: {row.state_on} {marks.span(row.subject, 90)}: {marks.span(row.state, 90)}", 1


async def _commitments(ctx: WakeContext, conn: asyncpg.Connection) -> tuple[str, int]:
    rows, total = await commitments.open_newest(conn, ctx.agent_id, limit=SHOWN)
    return commitments_line(rows, total, spotlight.for_agent(ctx.agent_id))


def commitments_line(rows: list[commitments.Open], total: int, marks: spotlight.Marks) -> tuple[str, int]:
    if not rows:
        return "Open commitments: none", 0
    items = "; ".join(f"#{r.commitment_id} {marks.span(r.title, 60)}" + (f" (due {spotlight.neutral(r.due_on)})" if r.due_on else "") for r in rows)
    return f"Open commitments ({len(rows)} of {queries.count_text(total)}, newest first): {items}", total


async def _retractions(ctx: WakeContext, conn: asyncpg.Connection) -> tuple[str, int]:
    rows, total = await retractions.newest(conn, ctx.agent_id, SHOWN, ctx.timezone)
    return retractions_line(rows, total, spotlight.for_agent(ctx.agent_id))


def retractions_line(rows: list[retractions.Newest], total: int, marks: spotlight.Marks) -> tuple[str, int]:
    if not rows:
        return "Retractions: none", 0
    items = "; ".join(
        f"{r.corrected_on} {marks.span(r.claim_verbatim, 50)} -> {marks.span(r.corrected_claim, 50)} ({spotlight.neutral(r.verdict)}"
        + (f"; fact {marks.span(r.refuted_fact, 40)} refuted)" if r.refuted_fact else ")") for r in rows
    )
    return f"Retractions ({len(rows)} of {queries.count_text(total)}, newest first): {items}", total


async def _actions(ctx: WakeContext, conn: asyncpg.Connection) -> tuple[str, int]:
    rows, total = await actions.since(conn, ctx.agent_id, ctx.now - ACTIONS_WINDOW, limit=SHOWN)
    return actions_line(rows, total, zoneinfo.ZoneInfo(ctx.timezone), spotlight.for_agent(ctx.agent_id))


def actions_line(rows: list[actions.Action], total: int, zone: zoneinfo.ZoneInfo, marks: spotlight.Marks) -> tuple[str, int]:
    if not rows:
        return "Confirmed actions, last 48 h: none", 0
    items = "; ".join(f"{clock.stamp(r.acted_at, zone)} {spotlight.neutral(r.tool)} on {spotlight.neutral(r.surface)}: {marks.span(r.summary, 60)}"
                      for r in rows)
    return f"Confirmed actions, last 48 h ({len(rows)} of {queries.count_text(total)}, newest first): {items}", total


PARTS = (("Settled state", _state), ("Open commitments", _commitments), ("Retractions", _retractions), ("Confirmed actions, last 48 h", _actions))
log = logs.get("wake.settled")


async def settled_facts(ctx: WakeContext) -> Found:
    lines, rows, parts = [HEADER], 0, []
    async with ctx.stores.pg_conn() as conn:
        for label, part in PARTS:
            try:
                line, found = await part(ctx, conn)
            except (asyncpg.PostgresError, SqlSourceError) as exc:
                # One unreadable part is reported on its line; the block's other lines still hold.
                reason = logs.redact_text(f"{type(exc).__name__}: {exc}")
                line, found = f"{label}: could not check: {reason}", 0
                log.warning("settled.part_failed", part=label, error=reason)
                parts.append(Part(name=label, reason=reason))
            else:
                parts.append(Part(name=label))
            lines.append(line)
            rows += found
    assert len(lines) <= MAX_LINES
    return Found(text="\n".join(lines), rows=rows, parts=tuple(parts))
