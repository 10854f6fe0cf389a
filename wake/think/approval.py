"""Calls that wait for an operator (docs/approvals.md): queued by the model loop, run by a later wake.

A tool that requires approval (it declares `requires_approval`, or the operator's
`tools.requires_approval` / `[tools.mcp.<server>] requires_approval` marks it) is never run in the
wake whose model called it. `queue` records the call in `tool_approvals` (the tool, its arguments,
the hash of the declaration this wake bound, the wake, and the reason the model gave: the call's
own `reason` argument when its schema has one, else the assistant's text of that turn) and
answers the model "queued for approval"; the transcript records the call with the outcome
`queued`. The same call asked again while one waits is answered with the one that waits.

`run_approved` is a later wake's part, before its arrival: it first expires the agent's calls
still pending `[tools] approval_ttl` after they were asked (`expired`, never run, in this wake's
approvals block), then claims the agent's approved calls
that this wake can run (one conditional UPDATE in the wake's fenced transaction, so a call runs
once however many replicas race), checks each against this wake's binding (a tool no longer bound,
or whose declaration changed since it was asked, is not run, and the row says why), runs the
others under `think.tool_timeout_s` with this wake's context, and records each answer. The
`approvals` arrival block (`wake.arrival.approval_results`) then shows what ran.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from decimal import Decimal

import asyncpg

from ledgers import actions, approvals
from ledgers.errors import StaleFence
from surfaces.registry import Registry, Tool
from wake import clock, logs
from wake.context import WakeContext
from wake.think.transcript import ErrorAnswer

# Argument names whose value is the model's reason for the call, when the tool's schema has one.
REASON_ARGUMENTS = ("reason", "why", "justification", "rationale")
QUEUED = "queued for approval"


def active(registry: Registry) -> bool:
    """True when some tool of the process requires approval: only then does a wake claim
    approved calls or show the `approvals` block (a process without one pays nothing)."""
    return any(t.requires_approval for t in registry)


def reason_of(tool: Tool, arguments: Mapping[str, object], turn_text: str) -> tuple[str, str]:
    """The reason the model gave, and where it came from: `arguments`, `assistant` or `none`."""
    properties = tool.parameters.get("properties")
    if isinstance(properties, Mapping):
        for key in REASON_ARGUMENTS:
            value = arguments.get(key)
            if key in properties and isinstance(value, str) and value.strip():
                return value.strip(), "arguments"
    if turn_text.strip():
        return turn_text.strip(), "assistant"
    return "", "none"


async def queue(ctx: WakeContext, tool: Tool, arguments: dict[str, object], *, turn: int, call_id: str, turn_text: str) -> ErrorAnswer:
    """Record the call pending approval (in the wake's fenced transaction) and answer the model."""
    reason, source = reason_of(tool, arguments, turn_text)
    tool_hash = ctx.tool_hashes.get(tool.name, "")
    async with ctx.harness_write() as conn:  # tool_approvals is the control plane: the tool role only reads it
        queued = await approvals.queue(
            conn, agent_id=ctx.agent_id, wake_id=ctx.wake_id, tier=ctx.tier, turn=turn, call_id=call_id, tool=tool.name,
            tool_hash=tool_hash, arguments=arguments, reason=reason, reason_from=source, at=clock.now(),
        )
    log = logs.get("wake.think").bind(agent=ctx.agent_id, tier=ctx.tier, wake_id=str(ctx.wake_id))
    log.info("approval.queued", tool=tool.name, approval=queued.id, existing=queued.existing, reason_from=source)
    if queued.existing:
        asked = f"wake {str(queued.wake_id)[:8]}" if queued.wake_id is not None else "an earlier wake"
        detail = f"this exact call already waits for an operator's decision (approval {queued.id}, asked in {asked}); it was not queued twice"
    else:
        detail = "an operator decides it (`wake approvals`)"
    detail += f". Not run now: if approved, it runs at your next wake that holds {tool.name}, and its result is in that wake's approvals block."
    return ErrorAnswer(json.dumps({"status": QUEUED, "approval": queued.id, "detail": detail}, ensure_ascii=False), "queued")


def _as_text(result: object) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=lambda v: float(v) if isinstance(v, Decimal) else str(v))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n…[truncated: {limit} of {len(text)} characters shown]"


UNSEALED = ("not run: its approval carries no valid seal, so no operator decided it through `wake approvals` "
            "(the row was written some other way); it is not run, and `wake verify --chain` names it")


def _not_runnable(ctx: WakeContext, claimed: approvals.Claimed) -> str | None:
    """Why a claimed call may not run in this wake, or None: its decision must be sealed (an
    operator's, through `wake approvals`), and its tool bound here with the declaration the asking
    wake bound."""
    if not claimed.sealed:
        return UNSEALED
    if claimed.tool not in {t.name for t in ctx.binding}:
        return f"not run: {claimed.tool} is not bound in this {ctx.tier} wake (its binding changed since the call was asked)"
    now = ctx.tool_hashes.get(claimed.tool)
    if now != claimed.tool_hash:
        was = claimed.tool_hash[:12] or "unknown"
        return f"not run: {claimed.tool}'s declaration changed since the call was asked (declaration {was}, now {(now or '')[:12]})"
    return None


async def _run_one(ctx: WakeContext, tool: Tool, claimed: approvals.Claimed) -> tuple[str, str]:
    """(outcome, answer) of one approved call, run as the model loop runs a call."""
    timeout = ctx.config.think.tool_timeout_s
    try:
        result = await asyncio.wait_for(tool.handler(ctx, **claimed.arguments), timeout=timeout)
    except StaleFence:
        raise
    except TimeoutError:
        return "error", f"the tool timed out after {timeout}s"
    except Exception as exc:  # a handler may fail in any way; the row and the arrival say how
        return "error", f"the tool failed: {logs.redact_text(f'{type(exc).__name__}: {exc}')}"
    if tool.mutates:  # `last_actions` names the wake's row, which does not exist yet: written with it
        acted_at = clock.now()
        summary = f"{tool.name} {json.dumps(claimed.arguments, sort_keys=True, default=str)} (approval {claimed.id})"

        async def record(conn: asyncpg.Connection) -> None:
            await actions.record(
                conn, agent_id=ctx.agent_id, surface=f"wake.{ctx.tier}", tool=tool.name, summary=_clip(summary, 180)[:200],
                arguments=claimed.arguments, wake_id=ctx.wake_id, fence=ctx.fence, acted_at=acted_at,
            )

        ctx.with_row.append(record)
    return "ok", _clip(_as_text(result), ctx.config.think.tool_result_max_chars)


async def run_approved(ctx: WakeContext, *, run: bool = True) -> list[tuple[int, str]]:
    """Expire the agent's calls pending past `[tools] approval_ttl`, then (unless not `run`: a
    halted wake runs none) claim and run the approved calls this wake can run; (approval, state)
    of each claimed one."""
    log = logs.get("wake.think").bind(agent=ctx.agent_id, tier=ctx.tier, wake_id=str(ctx.wake_id))
    try:
        async with ctx.harness_write() as conn:
            at = clock.now()
            expired = await approvals.expire(conn, agent_id=ctx.agent_id, ttl_s=ctx.config.tools.approval_ttl, at=at)
            claimed = await approvals.claim(
                conn, agent_id=ctx.agent_id, wake_id=ctx.wake_id, tier=ctx.tier, fence=ctx.fence, at=at,
                bound=[t.name for t in ctx.binding],
            ) if run else []
    except StaleFence:
        raise
    except Exception as exc:  # PostgreSQL: nothing was claimed; the approvals block says what it can read
        log.error("approval.claim_failed", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
        return []
    for e in expired:
        log.info("approval.expired", approval=e.id, tool=e.tool, requested_at=e.requested_at.isoformat())
    if claimed and claimed[0].interrupted:
        log.warning("approval.interrupted", calls=claimed[0].interrupted)
    by_name = {t.name: t for t in ctx.binding}
    done: list[tuple[int, str]] = []
    for c in claimed:
        started = clock.monotonic_ms()
        why_not = _not_runnable(ctx, c)
        if why_not is not None:
            state, outcome, answer = "not_run", None, why_not
        else:
            outcome, answer = await _run_one(ctx, by_name[c.tool], c)
            state = "ran"
        async with ctx.harness_write() as conn:
            await approvals.finish(conn, c.id, ctx.wake_id, state=state, outcome=outcome, result=answer, at=clock.now())
        log.info("approval.ran" if state == "ran" else "approval.not_run", approval=c.id, tool=c.tool, outcome=outcome,
                 approved_by=c.decided_by, latency_ms=round(clock.monotonic_ms() - started, 2))
        done.append((c.id, state))
    return done
