"""Context pressure in the model loop: the prompt's tokens ÷ the route's context window, before every call.

The loop calls `Pressure.before_call` with the prompt it is about to send; this module records the
turn (`wake_turns`), applies a compaction the agent asked for (`context_compact`), and follows the
agent's policy (docs/context.md):

- sovereign (the default): while pressure is at or above `narrow_at`, max_tokens narrows to half the room left (silently;
  the agent reads why in `context_status`); at each `remind_at` a reminder lists the options; at
  `act_at` a choice point. Nothing is forced.
- harness: reminders at each `remind_at`; at `act_at` a sliding-window compaction keeping the last
  `auto_keep_messages` messages, logged with the warnings that preceded it.

A decline (`ignore_compaction`) holds every reminder for `decline_grace_turns` turns; then the
reminder returns, more urgent. Every event goes to `context_events` with pressure before and after.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ledgers import context_events
from surfaces import conversation
from surfaces.conversation import Conversation, Cut, Request
from wake import clock, logs
from wake.config import ContextConfig
from wake.context import WakeContext

Counter = Callable[[], Awaitable[tuple[int, str]]]  # counts the prompt as it now stands: (tokens, how counted)
AGENT_KEYS = ("narrow_at", "remind_at", "act_at", "decline_grace_turns", "frame_of_mind.posture")

REMINDER = (
    "[wake: context pressure {pct}% of this route's {window}-token window{urgency}.]\n"
    "Your options: compact (context_compact with strategy sliding-window, summarize, prune-low-priority or archive-segment), "
    "reconfigure your thresholds (context_config_set), or continue (ignore_compaction with a reason; reminders then wait {grace} turns). "
    "Removed messages stay retrievable with archive_search."
)
CHOICE = (
    "[wake: choice point: context pressure {pct}% of this route's {window}-token window{urgency}.]\n"
    "Choose one: compact (context_compact), summarize-then-compact (context_compact strategy=summarize), or "
    "summarize-and-decline (write what you must keep, then ignore_compaction with a reason). Nothing is forced; "
    "at 100% this wake ends with what it has."
)
SUMMARIZE = (
    "Summarize the following part of your own conversation in this wake for your later self: what you looked at, "
    "what you found, what you did, what is still open. Plain text, at most {words} words."
)
SUMMARY_WORDS = 200


def effective(conf: ContextConfig, own: dict[str, object]) -> dict[str, object]:
    """The thresholds in force: the operator's config, overlaid by what the agent set for itself."""
    out: dict[str, object] = {
        "policy": conf.policy, "narrow_at": conf.narrow_at, "remind_at": list(conf.reminders()), "act_at": conf.act_at,
        "decline_grace_turns": conf.decline_grace_turns, "frame_of_mind.posture": conf.posture,
        "bounds": {"agent_min_threshold": conf.agent_min_threshold, "agent_max_threshold": conf.agent_max_threshold,
                   "agent_max_grace_turns": conf.agent_max_grace_turns},
    }
    out.update({k: v for k, v in own.items() if k in AGENT_KEYS})
    return out


class Pressure:
    """The loop's pressure keeper for one wake."""

    def __init__(self, ctx: WakeContext, conv: Conversation, summarize_call: Callable[[list[dict[str, object]]], Awaitable[str]]) -> None:
        self.ctx = ctx
        self.conv = conv
        self.conf = ctx.agent.context
        self.summarize_call = summarize_call
        self.narrowed = False
        self.warned: list[float] = []  # the pressures at which reminders were given (the harness log cites them)
        self.owed = False  # a decline's grace ran out: the next reminder is owed regardless of level
        self.log = logs.get("wake.think").bind(agent=ctx.agent_id, tier=ctx.tier, wake_id=str(ctx.wake_id))

    async def load(self) -> None:
        async with self.ctx.read() as conn:
            own = await context_events.settings(conn, self.ctx.agent_id)
        self.conv.settings = effective(self.conf, own)

    async def event(self, kind: str, reason: str, **fields: Any) -> None:
        async with self.ctx.harness_write() as conn:  # the context audit is the control plane (docs/isolation.md)
            await context_events.record(
                conn, agent_id=self.ctx.agent_id, wake_id=self.ctx.wake_id, turn=self.conv.turn, kind=kind, reason=reason,
                at=clock.now(), **fields,
            )
        self.conv.events.append(f"turn {self.conv.turn}: {kind} ({reason})")
        self.log.info("context.event", kind=kind, turn=self.conv.turn, strategy=fields.get("strategy"),
                      pressure_before=fields.get("pressure_before"), pressure_after=fields.get("pressure_after"))

    def _level(self, p: float) -> tuple[int, list[float]]:
        s = self.conv.settings
        marks = sorted([float(t) for t in s["remind_at"]] + [float(s["act_at"])])
        return sum(1 for t in marks if p >= t), marks

    async def before_call(self, *, turn: int, tokens: int, counted: str, recount: Counter) -> tuple[int, str]:
        """Apply what is owed before turn `turn`'s request; returns the prompt's tokens as it will be sent."""
        conv = self.conv
        conv.turn = turn
        window = conv.context_window
        p = tokens / window
        if conv.pending is not None:
            tokens, counted = await self._apply(conv.pending, p, recount)
            conv.pending = None
            p = tokens / window
        s = conv.settings
        if s["policy"] == "harness" and p >= float(s["act_at"]):
            cut = conversation.sliding_window(conv.messages, conv.base, self.conf.auto_keep_messages)
            if cut.removed:
                segment = await self._archive(cut, "sliding-window")
                tokens, counted = await recount()
                warned = ", ".join(f"{round(w * 100)}%" for w in self.warned) or "no reminder (the pressure rose in one turn)"
                reason = f"Auto-compacted at {round(p * 100)}% pressure. Agent was warned at {warned}."
                await self.event("auto_compacted", reason, strategy="sliding-window", pressure_before=p,
                                 pressure_after=tokens / window, detail={"segment": segment, "removed": len(cut.removed)})
                p = tokens / window
                conv.reminded_level = self._level(p)[0]
        was_narrowed, self.narrowed = self.narrowed, s["policy"] == "sovereign" and p >= float(s["narrow_at"])
        if self.narrowed and not was_narrowed:
            await self.event("narrowed", f"pressure {round(p * 100)}% reached narrow_at {s['narrow_at']}: max_tokens narrows to half the room left",
                             pressure_before=p)
        if turn == conv.declined_until + 1 and conv.declines:
            self.owed = True
        level, marks = self._level(p)
        if level and not conv.in_grace() and (level > conv.reminded_level or self.owed):
            choice = s["policy"] == "sovereign" and p >= float(s["act_at"])
            urgency = f"; you declined {conv.declines} time(s), this is reminder {len(self.warned) + 1}: URGENT" if conv.declines else ""
            text = (CHOICE if choice else REMINDER).format(pct=round(p * 100), window=window, urgency=urgency,
                                                           grace=s["decline_grace_turns"])
            conv.messages.append({"role": "user", "content": text})
            conv.reminded_level, self.owed = level, False
            self.warned.append(p)
            await self.event("choice" if choice else "reminded", f"pressure {round(p * 100)}% passed {marks[level - 1]}",
                             pressure_before=p, detail={"level": level, "declines": conv.declines})
            tokens, counted = await recount()
        conv.pressure = tokens / window
        conv.peak = max(conv.peak, conv.pressure)
        return tokens, counted

    def narrow(self, max_tokens: int, room: int) -> int:
        """max_tokens for the next request: narrowed to half the room once pressure passed narrow_at (sovereign)."""
        if self.narrowed and self.conv.settings["policy"] == "sovereign":
            return max(1, min(max_tokens, room // 2))
        return max_tokens

    async def _archive(self, cut: Cut, strategy: str) -> int:
        conv = self.conv
        segment = conv.next_segment
        conv.next_segment += 1
        async with self.ctx.write() as conn:
            await context_events.archive(conn, wake_id=self.ctx.wake_id, segment=segment, agent_id=self.ctx.agent_id,
                                         strategy=strategy, messages=cut.removed, at=clock.now())
        conv.messages[:] = cut.messages
        return segment

    async def _apply(self, req: Request, p: float, recount: Counter) -> tuple[int, str]:
        conv = self.conv
        if req.strategy == "defer":
            conv.reminded_level = self._level(p)[0]
            await self.event("deferred", req.reason or "deferred until the next threshold", strategy="defer", pressure_before=p)
            return await recount()
        ref = conv.archive_ref(conv.next_segment)
        if req.strategy == "sliding-window":
            cut = conversation.sliding_window(conv.messages, conv.base, req.keep_last)
        elif req.strategy == "summarize":
            pre = conversation.sliding_window(conv.messages, conv.base, req.keep_last)
            summary = await self.summarize_call(pre.removed) if pre.removed else ""
            cut = conversation.summarized(conv.messages, conv.base, req.keep_last, summary, ref)
        elif req.strategy == "prune-low-priority":
            cut = conversation.prune_low_priority(conv.messages, conv.base, ref)
        else:
            cut = conversation.archive_segment(conv.messages, conv.base, req.first or 0, req.last if req.last is not None else 0)
        if not cut.removed:
            await self.event("compacted", f"{req.reason or 'asked by the agent'}; nothing to remove", strategy=req.strategy, pressure_before=p,
                             pressure_after=p)
            return await recount()
        segment = await self._archive(cut, req.strategy)
        tokens, counted = await recount()
        conv.reminded_level = self._level(tokens / conv.context_window)[0]
        await self.event("compacted", req.reason or "asked by the agent", strategy=req.strategy, pressure_before=p,
                         pressure_after=tokens / conv.context_window,
                         detail={"segment": segment, "ref": conv.archive_ref(segment), "removed": len(cut.removed)})
        return tokens, counted


def summary_body(messages: list[dict[str, Any]]) -> dict[str, object]:
    """The one request a summarize compaction makes: the segment, as text, and the instruction."""
    lines = []
    for m in messages:
        calls = m.get("tool_calls") or []
        named = ", ".join(str((c.get("function") or {}).get("name")) for c in calls if isinstance(c, dict))
        lines.append(f"{m.get('role')}: {m.get('content') or ''}" + (f" [called: {named}]" if named else ""))
    return {"messages": [
        {"role": "system", "content": SUMMARIZE.format(words=SUMMARY_WORDS)},
        {"role": "user", "content": "\n".join(lines)},
    ]}


__all__ = ["AGENT_KEYS", "Pressure", "Request", "effective", "summary_body"]
