"""Step 7: what a wake does before (and instead of) the model, and what its answer turns out to be.

In order: a wake the Cloister canary halted settles `halted`; the tier's pre-check may end it
(`quiet` on exit 1, `failed` on any other end); then the whisper gate (`wake.think.gate`) decides
quiet, escalate or open. None of these calls the model. After the model, an answer that is the
tier's `ok_token` and nothing else settles `quiet` (`nothing_to_report`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ledgers import introspection
from ledgers.vocab import Result, Status, StopReason
from wake import logs
from wake.arrival import operator_sources
from wake.arrival.engine import Block
from wake.context import MemoryState, WakeContext
from wake.think import gate
from wake.think.loop import Thought
from wake.witness import manifest

log = logs.get("wake.cycle")


def before_model(ctx: WakeContext, blocks: list[Block], mani: manifest.Manifest) -> tuple[gate.Decision | None, Thought | None]:
    """Nothing runs while the Cloister canary halts the wake; then the tier's pre-check, then the
    gate. The thought is None when the model is to be called."""
    if ctx.memory_state.halt is not None:
        return None, halted(ctx.memory_state)
    stopped = prechecked(blocks)
    if stopped is not None:
        return None, stopped
    decision = gate_check(ctx, blocks, mani)
    return decision, None if decision.action == "open" else gated(decision)


def halted(state: MemoryState) -> Thought:
    """A wake the canary halted: no model call until a human acts (`wake memory ack|revert`)."""
    return Thought(
        status=Status.halted, note=f"halted: {state.halt}", error=None,
        thinking=introspection.Thinking(model=None, stop_reason=StopReason.cloister), final_text=None,
    )


def prechecked(blocks: Sequence[Block]) -> Thought | None:
    """The tier's pre-check decides before the gate and the model: None to go on (it passed, or
    the tier has none), else a quiet wake (exit 1) or a failed one (any other end), no call made."""
    block = next((b for b in blocks if b.name == operator_sources.PRECHECK), None)
    if block is None or block.result == Result.present:
        return None
    spent = introspection.Thinking(model=None, stop_reason=StopReason.precheck)
    if block.result == Result.empty:
        return Thought(status=Status.quiet, note="pre-check: nothing to do (exit 1)", error=None, thinking=spent, final_text=None)
    return Thought(status=Status.failed, note="pre-check failed", error=block.reason, thinking=spent, final_text=None)


def gate_check(ctx: WakeContext, blocks: list[Block], mani: manifest.Manifest) -> gate.Decision:
    """Quiet, escalate or open. A tier without a model route has nothing to gate."""
    if ctx.tier_config.model is None:
        return gate.Decision(action="open", reason="harness-only: not gated")
    decision = gate.decide(
        tier=ctx.tier, blocks=blocks, hashes=mani.blocks, previous_tier=ctx.previous_tier,
        tier_diff=ctx.diff.tier if ctx.diff is not None else None, config=ctx.config.gate,
    )
    if decision.action != "open":
        log.info(
            "gate.quiet" if decision.action == "quiet" else "gate.escalate",
            agent=ctx.agent_id, tier=ctx.tier, wake_id=str(ctx.wake_id), reason=decision.reason, to=decision.to,
        )
    return decision


def gated(decision: gate.Decision) -> Thought:
    """A wake the gate ended: no model call, no tokens."""
    if decision.action == "quiet":
        return Thought(
            status=Status.quiet, note=f"gate: {decision.reason}", error=None,
            thinking=introspection.Thinking(model=None, stop_reason=StopReason.gate), final_text=None,
        )
    return Thought(
        status=Status.completed, note=f"escalated to {decision.to}: {decision.reason}", error=None,
        thinking=introspection.Thinking(model=None, stop_reason=StopReason.escalated), final_text=None,
    )


def nothing_to_report(ok_token: str | None, thought: Thought) -> Thought:
    """A completed wake whose whole final answer is the tier's `ok_token` settles `quiet`, with
    its tokens spent and recorded (stop reason `nothing_to_report`, unlike the gate's `gate`), and
    no final text: no daybook entry, no delivery. The token inside other text is an answer."""
    if ok_token is None or thought.status != Status.completed or thought.final_text is None or thought.final_text.strip() != ok_token:
        return thought
    spent = dataclasses.replace(thought.thinking, stop_reason=StopReason.nothing_to_report) if thought.thinking else None
    return Thought(status=Status.quiet, note=f"nothing to report ({ok_token})", error=None, thinking=spent, final_text=None)
