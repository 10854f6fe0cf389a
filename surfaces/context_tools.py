"""The agent's own hand on its context: compact, decline, reconfigure, look (docs/context.md).

These act on the running wake's conversation (`ctx.conversation`, which the model loop holds).
A compaction is a request: the loop applies it once the current turn's calls are answered, before
the next request, archives what it removed (`archive_search archive:<wake>-seg-<n>` reads it
back) and writes the event, with pressure before and after, to the `context_events` audit. A
decline and a change of the agent's own settings are written here, once checked (a setting
against the operator's bounds), in the harness's fenced transaction (`harness_write`): the audit
is the control plane, which the tool role only reads (docs/isolation.md), so SQL from a tool
cannot record a setting past the bounds. Outside a model loop (no conversation) each says so and
changes nothing.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any

from ledgers import context_events
from surfaces.context import ToolContext
from surfaces.conversation import STRATEGIES, Conversation, Request
from surfaces.errors import ContextToolError
from surfaces.registry import Tool, tool

ARCHIVE_REF = re.compile(r"^archive:([0-9a-fA-F-]{36})-seg-([0-9]{1,6})$")
THRESHOLD_KEYS = ("narrow_at", "act_at")
AUDIT_DAYS = 7
NO_LOOP = "no conversation: this tool acts only inside a wake's model loop"


def _conversation(ctx: ToolContext) -> Conversation:
    conv = ctx.conversation
    if conv is None:
        raise ContextToolError(NO_LOOP)
    return conv


@tool(
    name="context_compact",
    description=(
        "Compact this wake's conversation before your next request. sliding-window keeps the last keep_last messages; "
        "summarize folds the earlier ones into one summary (one model call); prune-low-priority drops tool results and "
        "reasoning but keeps the calls; archive-segment removes conversation messages first..last (0-based after the "
        "arrival); defer does nothing until the next threshold. Removed messages stay retrievable with archive_search."
    ),
    parameters={
        "type": "object",
        "properties": {
            "strategy": {"enum": list(STRATEGIES)},
            "keep_last": {"type": "integer", "minimum": 1, "maximum": 200, "default": 6},
            "first": {"type": "integer", "minimum": 0},
            "last": {"type": "integer", "minimum": 0},
            "reason": {"type": "string", "maxLength": 500, "default": ""},
        },
        "required": ["strategy"],
        "additionalProperties": False,
    },
    surfaces={"wake.full"},
)
async def context_compact(
    ctx: ToolContext, strategy: str, keep_last: int = 6, first: int | None = None, last: int | None = None, reason: str = "",
) -> dict[str, object]:
    conv = _conversation(ctx)
    if strategy == "archive-segment" and (first is None or last is None or last < first):
        raise ContextToolError("archive-segment needs first and last (0-based, first <= last)")
    conv.pending = Request(strategy=strategy, keep_last=keep_last, first=first, last=last, reason=reason)
    return {
        "scheduled": strategy, "applies": "before your next request", "pressure": round(conv.pressure, 4),
        "archive_ref": None if strategy == "defer" else conv.archive_ref(conv.next_segment),
    }


@tool(
    name="ignore_compaction",
    description=(
        "Decline compaction for now, with the reason (required). Reminders hold for decline_grace_turns turns, then "
        "return more urgent. The decline and its reason go to your context audit."
    ),
    parameters={
        "type": "object",
        "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": 500}},
        "required": ["reason"],
        "additionalProperties": False,
    },
    surfaces={"wake.full"},
    mutates=True,
)
async def ignore_compaction(ctx: ToolContext, reason: str) -> dict[str, object]:
    conv = _conversation(ctx)
    if not reason.strip():
        raise ContextToolError("a reason is required")
    grace = int(conv.settings.get("decline_grace_turns", 3))
    conv.declined_until = conv.turn + grace
    conv.declines += 1
    async with ctx.harness_write() as conn:  # the audit is the control plane: written once checked, here
        await context_events.record(
            conn, agent_id=ctx.agent_id, wake_id=ctx.wake_id, turn=conv.turn, kind="declined", reason=reason.strip(),
            pressure_before=conv.pressure, at=ctx.now, detail={"grace_turns": grace, "declines": conv.declines},
        )
    conv.events.append(f"turn {conv.turn}: declined ({reason.strip()})")
    return {"declined": True, "reminders_resume_after_turn": conv.declined_until, "declines_this_wake": conv.declines}


def _threshold(key: str, text: str, bounds: dict[str, Any]) -> float:
    lo, hi = float(bounds.get("agent_min_threshold", 0.5)), float(bounds.get("agent_max_threshold", 0.97))
    try:
        t = float(text)
    except ValueError:
        raise ContextToolError(f"{key}: expected a number such as 0.85, got {text!r}") from None
    if t < lo:
        raise ContextToolError(f"refused: {key} {t} is below the bound context.agent_min_threshold = {lo}")
    if t > hi:
        raise ContextToolError(f"refused: {key} {t} is above the bound context.agent_max_threshold = {hi}")
    return t


def _grace(value: str, bounds: dict[str, Any]) -> int:
    top = int(bounds.get("agent_max_grace_turns", 10))
    if not value.isdigit():
        raise ContextToolError(f"decline_grace_turns: expected a whole number, got {value!r}")
    if int(value) > top:
        raise ContextToolError(f"refused: decline_grace_turns {value} is above the bound context.agent_max_grace_turns = {top}")
    return int(value)


def _parse(key: str, value: str, settings: dict[str, Any]) -> object:
    """The value of `key`, checked against the operator's bounds; a refusal names the bound."""
    bounds = settings.get("bounds", {})
    if key in THRESHOLD_KEYS:
        return _threshold(key, value, bounds)
    if key == "remind_at":
        return sorted(_threshold(key, v.strip(), bounds) for v in value.split(",") if v.strip())
    if key == "decline_grace_turns":
        return _grace(value, bounds)
    if key == "frame_of_mind.posture":
        if value not in ("on", "off"):
            raise ContextToolError(f"frame_of_mind.posture: expected on or off, got {value!r}")
        return value == "on"
    raise ContextToolError(f"unknown key {key!r}; expected one of narrow_at, remind_at, act_at, decline_grace_turns, frame_of_mind.posture")


@tool(
    name="context_config_set",
    description=(
        "Set one of your own context settings, within the bounds your operator set: narrow_at, act_at (0-1), "
        "remind_at (comma-separated), decline_grace_turns, frame_of_mind.posture (on|off). Takes effect now and in later wakes."
    ),
    parameters={
        "type": "object",
        "properties": {
            "key": {"enum": ["narrow_at", "remind_at", "act_at", "decline_grace_turns", "frame_of_mind.posture"]},
            "value": {"type": "string", "minLength": 1, "maxLength": 100},
            "reason": {"type": "string", "maxLength": 500, "default": ""},
        },
        "required": ["key", "value"],
        "additionalProperties": False,
    },
    surfaces={"wake.full"},
    mutates=True,
)
async def context_config_set(ctx: ToolContext, key: str, value: str, reason: str = "") -> dict[str, object]:
    conv = _conversation(ctx)
    parsed = _parse(key, value, conv.settings)
    before = conv.settings.get(key)
    async with ctx.harness_write() as conn:  # the audit is the control plane: written once checked, here
        await context_events.record(
            conn, agent_id=ctx.agent_id, wake_id=ctx.wake_id, turn=conv.turn, kind="config_set", reason=reason or f"set {key}",
            pressure_before=conv.pressure, at=ctx.now, detail={"key": key, "value": parsed, "previous": before},
        )
    conv.settings[key] = parsed
    conv.events.append(f"turn {conv.turn}: config_set {key}={parsed}")
    return {"key": key, "value": parsed, "previous": before}


async def status(ctx: ToolContext) -> dict[str, object]:
    """What `memory status` shows of context: this wake's pressure, the last wake's peak, the last compaction, the audit."""
    conv = ctx.conversation
    async with ctx.read() as conn:
        events = await context_events.recent(conn, ctx.agent_id, since=ctx.now - dt.timedelta(days=AUDIT_DAYS), limit=200)
        last = await context_events.last_wake_peak(conn, ctx.agent_id)
        settings = conv.settings if conv is not None and conv.settings else await context_events.settings(conn, ctx.agent_id)
    counts: dict[str, int] = {}
    for e in events:
        counts[str(e.kind)] = counts.get(str(e.kind), 0) + 1
    compactions = [e for e in events if e.kind in ("compacted", "auto_compacted")]
    narrowed = [e for e in events if e.kind == "narrowed"]
    out: dict[str, object] = {
        "pressure": round(conv.pressure, 4) if conv else None,
        "peak": round(conv.peak, 4) if conv else None,
        "turn": conv.turn if conv else None,
        "this_wake": list(conv.events) if conv else [],
        "last_wake": {"wake_id": str(last.wake_id), "peak": round(float(last.peak), 4), "turns": last.turns} if last else None,
        "last_compaction": {
            "kind": compactions[0].kind, "strategy": compactions[0].strategy, "at": compactions[0].at.isoformat(),
            "pressure_before": compactions[0].pressure_before, "pressure_after": compactions[0].pressure_after,
            "reason": compactions[0].reason,
        } if compactions else None,
        "why_max_tokens_narrowed": narrowed[0].reason if narrowed else None,
        "audit_last_7_days": counts,
        "settings": settings,
    }
    return out


@tool(
    name="context_status",
    description=(
        "Your context: this wake's pressure and peak, why max_tokens narrowed, the last compaction, "
        "your settings and a summary of the audit."
    ),
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    surfaces={"wake.full"},
)
async def context_status(ctx: ToolContext) -> dict[str, object]:
    return await status(ctx)


async def search(ctx: ToolContext, ref: str) -> dict[str, object]:
    """The archived segment `archive:<wake>-seg-<n>` (what `memory search archive:...` shows)."""
    m = ARCHIVE_REF.match(ref.strip())
    if m is None:
        raise ContextToolError(f"expected archive:<wake id>-seg-<n>, got {ref!r}")
    async with ctx.read() as conn:
        row = await context_events.archived(conn, agent_id=ctx.agent_id, wake_id=uuid.UUID(m.group(1)), segment=int(m.group(2)))
    if row is None:
        raise ContextToolError(f"no archived segment {ref}")
    return {"ref": ref, "strategy": row.strategy, "archived_at": row.archived_at.isoformat(), "messages": row.messages}


@tool(
    name="archive_search",
    description="Read back a segment a compaction removed from a wake's conversation: ref is archive:<wake id>-seg-<n>.",
    parameters={
        "type": "object",
        "properties": {"ref": {"type": "string", "pattern": "^archive:[0-9a-fA-F-]{36}-seg-[0-9]{1,6}$"}},
        "required": ["ref"],
        "additionalProperties": False,
    },
    surfaces={"wake.full"},
)
async def archive_search(ctx: ToolContext, ref: str) -> dict[str, object]:
    return await search(ctx, ref)


TOOLS: tuple[Tool, ...] = (archive_search, context_compact, context_config_set, context_status, ignore_compaction)
