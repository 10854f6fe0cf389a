"""The `approvals` block (docs/approvals.md): the agent's calls that wait for an operator, and
what became of those decided.

It shows, in this order: what this wake ran of the approved calls (with each answer) or did not
run (and why), what was rejected (by whom, why), expired (pending past `[tools] approval_ttl`: it
never runs) or interrupted since the agent's previous wake,
what is approved and waits for a wake that holds its tool, what another wake holds, and what
waits for a decision. The cycle adds it to every wake of a process where some tool requires
approval (`wake.think.approval.active`); it is volatile and compared by the whisper gate, so a
decision or a result opens the next whisper. A failure to read it is "could not check", as for
every block.
"""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from collections.abc import Sequence

from ledgers import approvals
from ledgers.approvals import Approval
from untrusted import spotlight
from wake.arrival.engine import CacheTier, Found, Source
from wake.context import WakeContext

APPROVALS_BLOCK = "approvals"
ARGUMENTS_SHOWN = 200
RESULT_SHOWN = 1500
EMPTY = "None of your tool calls waits for approval, and none was decided since your last wake."


def _when(at: dt.datetime | None, zone: zoneinfo.ZoneInfo) -> str:
    return f"{at.astimezone(zone):%Y-%m-%d %H:%M}" if at is not None else "?"


def _call(a: Approval, marks: spotlight.Marks) -> str:
    """The call: its tool and its arguments (the model's, so stored text: marked data)."""
    arguments = json.dumps(a.arguments, sort_keys=True, ensure_ascii=False, default=str)
    return f"approval {a.id}: {spotlight.neutral(a.tool)} {marks.span(arguments, ARGUMENTS_SHOWN)}"


def _line(a: Approval, ctx: WakeContext, zone: zoneinfo.ZoneInfo, marks: spotlight.Marks) -> tuple[int, str]:
    """(its place in the block, its line). The operator's name and reason and the call's result are
    stored text: marked data."""
    who = marks.span(a.decided_by or "?", 80)
    by = f"approved by {who}" + (f" ({marks.span(a.why, 200)})" if a.why else "")
    call = _call(a, marks)
    if a.run_wake_id == ctx.wake_id and a.state == "ran":
        return 0, f"- {call} — {by}; ran in this wake: {spotlight.neutral(str(a.outcome))}\n  result: {marks.span(a.result or '', RESULT_SHOWN)}"
    if a.run_wake_id == ctx.wake_id and a.state == "not_run":
        return 0, f"- {call} — {by}; {marks.span(a.result or '', RESULT_SHOWN)}"
    if a.state == "rejected":
        why = f": {marks.span(a.why, 300)}" if a.why else " (no reason given)"
        return 1, f"- {call} — rejected by {who} at {_when(a.decided_at, zone)}{why}; it will not run"
    if a.state == "expired":
        asked = f"asked {_when(a.requested_at, zone)} in wake {str(a.wake_id)[:8]}"
        return 1, (f"- {call} — expired at {_when(a.decided_at, zone)}: no operator decided it in time ({asked}); "
                   "it will not run (ask again if it is still needed)")
    if a.state == "interrupted":
        return 1, f"- {call} — {by}; interrupted: {marks.span(a.result or '', RESULT_SHOWN)}"
    if a.state == "approved":
        return 2, f"- {call} — {by} at {_when(a.decided_at, zone)}; runs at your next wake that holds {spotlight.neutral(a.tool)}"
    if a.state == "running":
        return 3, f"- {call} — {by}; claimed by wake {str(a.run_wake_id)[:8]} at {_when(a.claimed_at, zone)}, no result recorded yet"
    asked = f"asked {_when(a.requested_at, zone)} in wake {str(a.wake_id)[:8]}"
    return 4, f"- {call} — waiting for an operator's decision ({asked})"


HEADS = (
    "Approved calls at this wake:",
    "Decided since your last wake:",
    "Approved, not yet run:",
    "Held by another wake:",
    "Waiting for a decision (not run; do not ask again):",
)


def render(rows: Sequence[Approval], ctx: WakeContext) -> Found:
    if not rows:
        return Found(text=EMPTY, rows=0)
    zone = zoneinfo.ZoneInfo(ctx.timezone)
    marks = spotlight.for_agent(ctx.agent_id)
    groups: dict[int, list[str]] = {}
    for a in rows:
        place, line = _line(a, ctx, zone, marks)
        groups.setdefault(place, []).append(line)
    text = "\n".join(f"{HEADS[place]}\n" + "\n".join(groups[place]) for place in sorted(groups))
    return Found(text=text, rows=len(rows))


async def block(ctx: WakeContext) -> Found:
    since = ctx.previous.started_at if ctx.previous is not None else dt.datetime.min.replace(tzinfo=dt.UTC)
    async with ctx.stores.pg_conn() as conn:
        rows = await approvals.for_arrival(conn, ctx.agent_id, ctx.wake_id, since)
    return render(rows, ctx)


SOURCE = Source(name=APPROVALS_BLOCK, cache_tier=CacheTier.volatile, fn=block)

