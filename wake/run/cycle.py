"""One wake, steps 4-10 (docs/design.md, "One wake"). This module reads like the steps it runs.

Steps 1-3 (trigger, slot claim, lease and fence) are `wake.run.claim`'s; `run_wake` is called
with them done (or, for a dry run, not needed). The gate (`wake.think.gate`) and the model loop
(`wake.think.loop`) run only for a tier with a model route; without one a wake runs
harness-only and says so on its row. A whisper the gate escalates settles first, then the
promoted wake runs at once (trigger `escalation`, its cause on the row) under the same fence.

Every attempt leaves exactly one row: an exception anywhere settles it `failed` with the error,
a cancellation settles it `aborted`, and an exception before the row exists still writes one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgers import daybook, fences, introspection
from ledgers.fences import StaleFence
from ledgers.vocab import Status, Tier, Trigger
from surfaces.registry import Registry, Tool
from wake import __version__, clock, logs
from wake.arrival import engine as arrival
from wake.arrival import sources
from wake.arrival.engine import Block, Source
from wake.config import Config
from wake.context import WakeContext, WakeRequest
from wake.observe import metrics
from wake.run.session import Session
from wake.stores import Stores
from wake.think import client as model
from wake.think import gate
from wake.think import loop as thinking_loop
from wake.witness import diff, manifest

log = logs.get("wake.cycle")


@dataclass(frozen=True, kw_only=True)
class WakeOutcome:
    wake_id: uuid.UUID
    agent_id: str
    tier: str
    trigger: str
    status: str
    blocks: list[Block]
    binding: list[Tool]
    manifest: manifest.Manifest | None
    diff: Mapping[str, Any] | None
    note: str | None
    error: str | None
    recorded: bool
    duration_ms: float
    gate: str | None = None
    thinking: introspection.Thinking | None = None
    final_text: str | None = None
    escalation_cause: str | None = None
    escalated: WakeOutcome | None = None

    @property
    def prompt(self) -> str:
        """The arrival as one text in prompt order (`wake up --dry-run`); the model's own messages
        are built by `wake.prompt`."""
        return arrival.render_prompt(self.blocks)


def tier_sources(config: Config, agent_id: str, tier: str) -> list[Source]:
    return [sources.resolve(config, name) for name in config.tier(agent_id, tier).sources]


def _with_diff(ctx: WakeContext, earlier: list[Block]) -> WakeContext:
    states = {b.name: b.state(manifest.sha256_text(b.text)) for b in earlier}
    return dataclasses.replace(
        ctx,
        diff={
            "agent": diff.compare(ctx.previous, ctx.tool_hashes, states),
            "tier": diff.compare(ctx.previous_tier, ctx.tool_hashes, states),
        },
    )


async def arrive(ctx: WakeContext, source_list: Sequence[Source], timeout_s: float) -> tuple[list[Block], WakeContext]:
    """Step 4 (and the diff of step 7, which is itself an arrival block): the blocks, and the
    context carrying the diff that the derived sources saw."""
    later: list[WakeContext] = []

    def with_diff(c: WakeContext, earlier: list[Block]) -> WakeContext:
        later.append(_with_diff(c, earlier))
        return later[0]

    blocks = await arrival.assemble(source_list, ctx, timeout_s, with_earlier=with_diff)
    return blocks, later[0]


def bind(registry: Registry, config: Config, agent_id: str, tier: str) -> list[Tool]:
    """Step 5: the binding comes from the registry's surface declarations and nothing else."""
    return registry.binding(config.tier(agent_id, tier).binds)


async def run_wake(
    session: Session,
    request: WakeRequest,
    *,
    now: Callable[[], dt.datetime] = clock.now,
    dry_run: bool = False,
    source_list: Sequence[Source] | None = None,
) -> WakeOutcome:
    """Run one wake: arrive, bind, manifest, record, gate, think, settle (then any escalation).

    The model calls go through the session's client; a session without one (a test's) opens its
    own for this wake and closes it."""
    config, stores, registry = session.config, session.stores, session.registry
    agent_id, tier, trigger, scheduled_for = request.agent_id, request.tier, request.trigger, request.scheduled_for
    fence, wake_id = request.fence, request.wake_id
    tier_conf = config.tier(agent_id, tier)
    started_at = now()
    started = clock.monotonic_ms()
    bound = logs.get("wake.cycle").bind(agent=agent_id, tier=tier, wake_id=str(wake_id))
    bound.info("wake.started", trigger=trigger, scheduled_for=scheduled_for.isoformat() if scheduled_for else None, dry_run=dry_run)
    row_base = dict(
        wake_id=wake_id, agent_id=agent_id, tier=tier, trigger=trigger, scheduled_for=scheduled_for, started_at=started_at,
        fence=fence, escalation_cause=request.cause, **provenance(config),
    )
    recorded = settled_inline = False
    blocks: list[Block] = []
    binding: list[Tool] = []
    mani: manifest.Manifest | None = None
    wake_diff: Mapping[str, Any] | None = None
    status, note, error = Status.failed, None, None
    decision: gate.Decision | None = None
    thought: thinking_loop.Thought | None = None
    own_client = session.models is None
    models = session.models or model.Client()
    try:
        binding = bind(registry, config, agent_id, tier)
        bound.info("bind.done", tools=[t.name for t in binding], bound=len(binding), registry=len(registry))
        tool_hashes = {t.name: manifest.tool_hash(t) for t in binding}
        async with stores.pg_conn() as conn:
            previous, previous_tier = await introspection.previous_both(conn, agent_id, tier, started_at)
        ctx = WakeContext(
            config=config, stores=stores, request=request, now=started_at, binding=tuple(binding), previous=previous,
            previous_tier=previous_tier, tool_hashes=tool_hashes,
        )
        blocks, ctx = await arrive(
            ctx, source_list if source_list is not None else tier_sources(config, agent_id, tier), tier_conf.source_timeout_ms / 1000
        )
        wake_diff = ctx.diff
        mani = manifest.of_hashes(agent_id, tier, {b.name: manifest.sha256_text(b.text) for b in blocks}, tool_hashes)
        if dry_run:
            status, note = Status.completed, "dry run: nothing recorded"
        else:
            wake_diff_row = dict(wake_diff) if wake_diff is not None else None
            decision = gate_check(ctx, blocks, mani)
            if decision.action != "open":
                # The gate ended it (quiet, or escalated): nothing runs between the row and its
                # settle, so the row is written settled, in one statement.
                thought = gated(decision)
                status, note, error = Status(thought.status), thought.note, thought.error
                row = _row(row_base, registry, mani, blocks, diff=wake_diff_row, note=note, error=error)
                await _insert(stores, row, status=status, thinking=thought.thinking)
                recorded = settled_inline = True
                bound.info("manifest.recorded", root=mani.root, blocks=len(blocks), tools=len(binding))
            else:
                await _insert(stores, _row(row_base, registry, mani, blocks, diff=wake_diff_row))
                recorded = True
                bound.info("manifest.recorded", root=mani.root, blocks=len(blocks), tools=len(binding))
                thought = await think(ctx, blocks, models)
                status, note, error = Status(thought.status), thought.note, thought.error
                if thought.final_text:
                    await record_daybook(ctx, thought.final_text)
    except asyncio.CancelledError:
        status, error = Status.aborted, "cancelled"
        raise
    except Exception as exc:
        status, error = Status.failed, logs.redact_text(f"{type(exc).__name__}: {exc}")
        bound.exception("wake.failed")
    finally:
        if not dry_run and not settled_inline:
            settled = _settle(stores, recorded, row_base, status, note, error, registry, mani, blocks, thought.thinking if thought else None)
            recorded = await asyncio.shield(settled) or recorded
        if own_client:
            await asyncio.shield(models.aclose())
        duration_ms = clock.monotonic_ms() - started
        bound.info("wake.settled", status=status, note=note, error=error, duration_ms=round(duration_ms, 2), root=mani.root if mani else None)
        if not dry_run:
            spent = thought.thinking if thought else None
            metrics.observe_settled(agent_id, tier, status, duration_ms / 1000, spent, spent.refusals if spent else 0)
    escalated = None
    if decision is not None and decision.action == "escalate" and recorded and status == Status.completed:
        assert decision.to is not None
        promoted = WakeRequest(
            agent_id=agent_id, tier=Tier(decision.to), trigger=Trigger.escalation, fence=fence,
            cause=f"whisper {str(wake_id)[:8]}: {decision.reason}",
        )
        escalated = await run_wake(session, promoted, now=now)
    return WakeOutcome(
        wake_id=wake_id, agent_id=agent_id, tier=tier, trigger=trigger, status=status, blocks=blocks, binding=binding,
        manifest=mani, diff=wake_diff, note=note, error=error, recorded=recorded,
        duration_ms=duration_ms, gate=decision.reason if decision else None, thinking=thought.thinking if thought else None,
        final_text=thought.final_text if thought else None, escalation_cause=request.cause, escalated=escalated,
    )


def gate_check(ctx: WakeContext, blocks: list[Block], mani: manifest.Manifest) -> gate.Decision:
    """Step 8: quiet, escalate or open. A tier without a model route has nothing to gate."""
    if ctx.config.tier(ctx.agent_id, ctx.tier).model is None:
        return gate.Decision(action="open", reason="harness-only: not gated")
    decision = gate.decide(
        tier=ctx.tier, blocks=blocks, hashes=mani.blocks, previous_tier=ctx.previous_tier, tier_diff=ctx.diff["tier"],
        config=ctx.config.gate,
    )
    if decision.action != "open":
        log.info(
            "gate.quiet" if decision.action == "quiet" else "gate.escalate",
            agent=ctx.agent_id,
            tier=ctx.tier,
            wake_id=str(ctx.wake_id),
            reason=decision.reason,
            to=decision.to,
        )
    return decision


def gated(decision: gate.Decision) -> thinking_loop.Thought:
    """A wake the gate ended: no model call, no tokens."""
    if decision.action == "quiet":
        return thinking_loop.Thought(
            status="quiet", note=f"gate: {decision.reason}", error=None,
            thinking=introspection.Thinking(model=None, stop_reason="gate"), final_text=None,
        )
    return thinking_loop.Thought(
        status="completed", note=f"escalated to {decision.to}: {decision.reason}", error=None,
        thinking=introspection.Thinking(model=None, stop_reason="escalated"), final_text=None,
    )


async def think(ctx: WakeContext, blocks: list[Block], models: model.Client) -> thinking_loop.Thought:
    """Step 9: the model loop over the tier's route; without a route, harness-only (the row says so)."""
    route_name = ctx.config.tier(ctx.agent_id, ctx.tier).model
    if route_name is None:
        return thinking_loop.Thought(
            status="completed", note="harness-only: no model route is configured for this tier", error=None, thinking=None, final_text=None,
        )
    return await thinking_loop.run(ctx, route_name=route_name, route=ctx.config.models[route_name], blocks=blocks, client=models)


async def record_daybook(ctx: WakeContext, text: str) -> None:
    """The wake's final assistant text is its daybook entry (the `daybook` ledger, which the next
    wakes read), and is kept on the introspection row (`final_text`) as the wake's own summary."""
    async with ctx.write() as conn:
        await introspection.record_final_text(conn, ctx.wake_id, text)
        if text.strip():
            await daybook.append(conn, agent_id=ctx.agent_id, wake_id=ctx.wake_id, entry=text, written_at=ctx.now)


def provenance(config: Config) -> dict[str, Any]:
    """Who wrote a ledger row: host, pid, code version, config hash."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "version": __version__, "config_hash": config.config_hash()}


def _row(
    row_base: dict[str, Any], registry: Registry, mani: manifest.Manifest | None, blocks: list[Block], **extra: Any
) -> introspection.WakeRow:
    """The ledger row of this attempt; without a manifest it records no blocks and no tools."""
    return introspection.WakeRow(
        **row_base, manifest_root=mani.root if mani else None,
        blocks={b.name: b.state(mani.blocks[b.name]) for b in blocks} if mani else {},
        tool_hashes=mani.tools if mani else {}, registry_tool_count=len(registry), **extra,
    )


async def _insert(
    stores: Stores, row: introspection.WakeRow, *, status: str = Status.started, thinking: introspection.Thinking | None = None,
) -> None:
    """The row (`started`, or already settled with its totals), in one statement that checks the
    fence; a stale fence writes nothing and raises."""
    async with stores.pg_conn() as conn:
        if status == Status.started:
            written = await introspection.insert_fenced(conn, row, status=status)
        else:
            written = await introspection.insert_settled_fenced(conn, row, status, thinking)
        if not written:
            await _refused(conn, row.agent_id, row.fence)


async def _refused(conn: Any, agent_id: str, fence: int | None) -> None:
    """A fenced statement wrote nothing: raise `StaleFence` (logged) if the fence is stale."""
    newest = await fences.newest(conn, agent_id)
    if fence is not None and newest != fence:
        log.warning("fence.stale", agent=agent_id, fence=fence, newest=newest)
        metrics.stale_fence(agent_id)
        raise StaleFence(agent_id, fence, newest)


async def _settle(
    stores: Stores, recorded: bool, row_base: dict[str, Any], status: str, note: str | None, error: str | None,
    registry: Registry, mani: manifest.Manifest | None, blocks: list[Block], thinking: introspection.Thinking | None = None,
) -> bool:
    """Step 10: close the row with the loop's totals, in one statement that checks the fence; write
    a failed row if the wake died before recording one."""
    agent_id, fence = row_base["agent_id"], row_base["fence"]
    try:
        if not recorded:
            await _insert(stores, _row(row_base, registry, mani, blocks, note=note, error=error), status=status, thinking=thinking)
            return True
        async with stores.pg_conn() as conn:
            if not await introspection.settle_fenced(
                conn, row_base["wake_id"], agent_id, fence, status, note=note, error=error, thinking=thinking,
            ):
                await _refused(conn, agent_id, fence)  # else the row was no longer open: someone closed it
            return True
    except StaleFence as exc:  # a newer lease holder exists: this wake writes nothing more
        log.warning("wake.settle_refused", wake_id=str(row_base["wake_id"]), status=status, fence=exc.fence, newest=exc.newest)
        return False
    except Exception:  # the store itself is gone: the log line is the only witness left
        log.exception("wake.settle_failed", wake_id=str(row_base["wake_id"]), status=status)
        return False
