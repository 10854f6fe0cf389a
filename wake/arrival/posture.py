"""Frame of mind at arrival: the `posture` block and the `context_audit` block.

`posture` is read from the time since a human last wrote to the agent (`human_contact`):
under `posture_present_s` present, under `posture_warm_s` warm, under `posture_cool_s` cool,
otherwise cold. Each posture says what it implies; a cold one lists the open commitments. With no
human contact at all the block says so and is typed empty (never cold). The agent turns posture
off for itself with `context_config_set frame_of_mind.posture off` (the block is then disabled).

`context_audit` carries the pattern of the agent's own pressure events over the last week (how
often it deferred or declined compaction and why, how often the harness compacted for it).
"""

from __future__ import annotations

import collections
import datetime as dt

from ledgers import commitments, contact, context_events, queries
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
AUDIT_DAYS = 7


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
        lines = [f"Posture: {posture} (a human last wrote {_ago(elapsed)} ago). {IMPLIES[posture]}"]
        if posture == "cold":
            rows, total = await commitments.open_newest(conn, ctx.agent_id, limit=COMMITTED_SHOWN)
            lines.append(f"Open commitments ({queries.count_text(total)}):" if total else "Open commitments: none.")
            lines += [f"- {r.title}" + (f" (due {r.due_on})" if r.due_on else "") for r in rows]
    return Found(text="\n".join(lines), rows=1)


async def audit(ctx: WakeContext) -> Found:
    async with ctx.read() as conn:
        events = await context_events.recent(conn, ctx.agent_id, since=ctx.now - dt.timedelta(days=AUDIT_DAYS), limit=200)
    put_off = [e for e in events if e.kind in ("declined", "deferred")]
    autos = [e for e in events if e.kind == "auto_compacted"]
    compacted = [e for e in events if e.kind == "compacted"]
    lines: list[str] = []
    if put_off:
        reasons = collections.Counter(e.reason for e in put_off)
        why = "; ".join(f"{reason} ({n}×)" if n > 1 else reason for reason, n in reasons.most_common(3))
        lines.append(f"You deferred or declined compaction {len(put_off)} times in the last {AUDIT_DAYS} days, because: {why}.")
    if autos:
        lines.append(f"The harness compacted your context automatically {len(autos)} times in the last {AUDIT_DAYS} days.")
    if compacted:
        lines.append(f"You compacted {len(compacted)} times ({', '.join(sorted({str(e.strategy) for e in compacted}))}).")
    if not lines:
        return Found(text=f"No context pressure events in the last {AUDIT_DAYS} days.", rows=0)
    return Found(text="\n".join(lines), rows=len(put_off) + len(autos) + len(compacted))
