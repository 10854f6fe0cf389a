"""Frame of mind at arrival: the `posture` block and the `context_audit` block.

`posture` is read from the time since a human last wrote to the agent (`human_contact`):
under `posture_present_s` present, under `posture_warm_s` warm, under `posture_cool_s` cool,
otherwise cold. Each posture says what it implies; a cold one lists the newest open commitments
(their titles marked data, `untrusted.spotlight`; the header counts the lines it heads). With no
human contact at all the block says so and is typed empty (never cold). The agent turns posture
off for itself with `context_config_set frame_of_mind.posture off` (the block is then disabled).

`context_audit` carries the pattern of the agent's own pressure events over the last week (how
often it deferred or declined compaction and why, how often the harness compacted for it). The
reasons are the model's own words: marked data.
"""

from __future__ import annotations

import collections
import datetime as dt

from ledgers import commitments, contact, context_events, queries
from untrusted import spotlight
from wake.arrival.engine import Found
from wake.config import ContextConfig
from wake.context import WakeContext
from wake.errors import Disabled

IMPLIES = {
    "present": "A human is here now: answer what they asked, briefly; no recap.",
    "warm": "A human was here minutes ago: pick up the thread where it was; a line of recap at most.",
    "cool": "Hours have passed since a human wrote: recap briefly what changed before acting.",
    "cold": "A long time since a human wrote: give a full recap and surface the committed items before anything new.",
}
COMMITTED_SHOWN = 5
TITLE_CHARS = 200
AUDIT_DAYS = 7
REASONS_SHOWN = 3
REASON_CHARS = 200


def posture_for(elapsed_s: float, conf: ContextConfig) -> str:
    """The posture after `elapsed_s` seconds since the last human message."""
    if elapsed_s < conf.posture_present_s:
        return "present"
    if elapsed_s < conf.posture_warm_s:
        return "warm"
    if elapsed_s < conf.posture_cool_s:
        return "cool"
    return "cold"


def _ago(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h"
    return f"{s // 86400} days"


async def block(ctx: WakeContext) -> Found:
    conf = ctx.agent.context
    async with ctx.read() as conn:
        own = await context_events.settings(conn, ctx.agent_id)
        if not conf.posture or own.get("frame_of_mind.posture") is False:
            raise Disabled("posture is off for this agent (context.posture, or frame_of_mind.posture set by the agent)")
        last = await contact.last_received(conn, ctx.agent_id)
        if last is None:
            return Found(text="No human has written to this agent yet: there is no posture to take.", rows=0)
        elapsed = max(0.0, (ctx.now - last).total_seconds())
        posture = posture_for(elapsed, conf)
        rows, total = await commitments.open_newest(conn, ctx.agent_id, limit=COMMITTED_SHOWN) if posture == "cold" else ([], 0)
    return Found(text=posture_text(posture, elapsed, rows, total, spotlight.for_agent(ctx.agent_id)), rows=1)


def posture_text(posture: str, elapsed: float, rows: list[commitments.Open], total: int, marks: spotlight.Marks) -> str:
    """The block's text; a cold posture lists `rows` (the newest open commitments of `total`),
    each title one marked span, under a header that counts them."""
    lines = [f"Posture: {posture} (a human last wrote {_ago(elapsed)} ago). {IMPLIES[posture]}"]
    if posture == "cold":
        lines.append(f"Open commitments ({len(rows)} of {queries.count_text(total)}, newest first):" if total else "Open commitments: none.")
        lines += [f"- {marks.span(r.title, TITLE_CHARS)}" + (f" (due {spotlight.neutral(r.due_on)})" if r.due_on else "") for r in rows]
    return "\n".join(lines)


async def audit(ctx: WakeContext) -> Found:
    async with ctx.read() as conn:
        events = await context_events.recent(conn, ctx.agent_id, since=ctx.now - dt.timedelta(days=AUDIT_DAYS), limit=200)
    return audit_text(events, spotlight.for_agent(ctx.agent_id))


def audit_text(events: list[context_events.Event], marks: spotlight.Marks) -> Found:
    """The audit's lines over `events`; the reasons (the model's words) are marked data."""
    put_off = [e for e in events if e.kind in ("declined", "deferred")]
    autos = [e for e in events if e.kind == "auto_compacted"]
    compacted = [e for e in events if e.kind == "compacted"]
    lines: list[str] = []
    if put_off:
        reasons = collections.Counter(e.reason for e in put_off)
        why = "; ".join(marks.span(reason, REASON_CHARS) + (f" ({n}×)" if n > 1 else "") for reason, n in reasons.most_common(REASONS_SHOWN))
        lines.append(f"You deferred or declined compaction {len(put_off)} times in the last {AUDIT_DAYS} days, because: {why}.")
    if autos:
        lines.append(f"The harness compacted your context automatically {len(autos)} times in the last {AUDIT_DAYS} days.")
    if compacted:
        strategies = ", ".join(spotlight.neutral(s) for s in sorted({str(e.strategy) for e in compacted}))
        lines.append(f"You compacted {len(compacted)} times ({strategies}).")
    if not lines:
        return Found(text=f"No context pressure events in the last {AUDIT_DAYS} days.", rows=0)
    return Found(text="\n".join(lines), rows=len(put_off) + len(autos) + len(compacted))
