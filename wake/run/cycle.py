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

import asyncpg

from ledgers import daybook, introspection, memory_ledger
from ledgers.fences import StaleFence
from ledgers.vocab import Result, Status, StopReason, Tier, Trigger
from memory.repo import MemoryRepo
from surfaces import memory as memory_tools
from surfaces.registry import Registry, Tool
from wake import __version__, clock, logs
from wake.arrival import absence, sources
from wake.arrival import engine as arrival
from wake.arrival import operator as operator_sources
from wake.arrival.engine import Block, Source
from wake.config import Config
from wake.context import MemoryState, WakeContext, WakeRequest
from wake.errors import StoreUnavailable
from wake.observe import metrics
from wake.run import deliver
from wake.run.session import Session
from wake.stores import Stores, lease
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
    unreachable: str | None = None  # the store whose outage ended the wake (`StoreUnavailable.store`), if one did

    @property
    def prompt(self) -> str:
        """The arrival as one text in prompt order (`wake up --dry-run`); the model's own messages
        are built by `wake.prompt`."""
        return arrival.render_prompt(self.blocks)


def tier_sources(config: Config, agent_id: str, tier: str) -> list[Source]:
    """The tier's named sources, then those its operator keys add (instructions, pre-check)."""
    conf = config.tier(agent_id, tier)
    return [sources.resolve(config, name) for name in conf.sources] + operator_sources.tier_sources(conf)


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


async def with_row(ctx: WakeContext, conn: asyncpg.Connection) -> None:
    """The writes the arrival left for the wake's row (`WakeContext.with_row`), in the row's own
    transaction; one that fails is logged and rolled back to its savepoint, and the wake goes on."""
    for write in ctx.with_row:
        try:
            async with conn.transaction():
                await write(conn)
        except (asyncpg.PostgresError, ValueError) as exc:
            log.warning("wake.row_write_failed", agent=ctx.agent_id, wake_id=str(ctx.wake_id), error=logs.redact_text(f"{type(exc).__name__}: {exc}"))


def bind(registry: Registry, config: Config, agent_id: str, tier: str, *, halted: bool = False) -> list[Tool]:
    """Step 5: the binding comes from the registry's surface declarations and nothing else; a wake
    the Cloister canary halted binds no tool that mutates, and a tier whose memory is read-only
    (`memory.writable`, false for a whisper unless set) none that writes memory."""
    conf = config.tier(agent_id, tier)
    tools = registry.binding(conf.binds)
    if not conf.memory_writable(tier):
        tools = [t for t in tools if t.name not in memory_tools.WRITING_TOOLS]
    return [t for t in tools if not t.mutates] if halted else tools


async def open_memory(config: Config, stores: Stores, request: WakeRequest, now: dt.datetime, *, dry_run: bool) -> MemoryState:
    """Before the arrival: open the agent's memory (created on first use) and run the Cloister
    canary over what changed since its last audit. An open HALT, or a canary that cannot run,
    halts the wake: it still arrives and records, but binds no writing tool and calls no model.
    A dry run audits nothing (it records nothing) and creates no repository."""
    agent_id = request.agent_id
    if not config.agents[agent_id].memory.enabled:
        return MemoryState()
    path = config.memory_path(agent_id)
    try:
        if dry_run and not (path / ".git").exists():
            return MemoryState(enabled=True)
        repo = MemoryRepo.open(path, config.memory_config(agent_id), at=now)
        if dry_run:
            async with stores.pg_conn() as conn:
                return MemoryState(enabled=True, repo=repo, halt=await memory_ledger.halt_reason(conn, agent_id))
        result = await memory_ledger.run_canary(
            stores.pg_conn, lambda: lease.fenced(stores, agent_id, request.fence), repo, agent_id=agent_id, wake_id=request.wake_id, at=now,
        )
        halt = None
        if result.has_open_halt:
            async with stores.pg_conn() as conn:
                halt = await memory_ledger.halt_reason(conn, agent_id)
        return MemoryState(enabled=True, repo=repo, canary=result, halt=halt)
    except StaleFence:
        raise
    except Exception as exc:  # git, the file system or the ledger: the canary could not look, so nothing is trusted
        error = logs.redact_text(f"{type(exc).__name__}: {exc}")
        log.error("cloister.failed", agent=agent_id, wake_id=str(request.wake_id), error=error)
        return MemoryState(enabled=True, error=error, halt=f"cloister could not run: {error}")


def halted(state: MemoryState) -> thinking_loop.Thought:
    """A wake the canary halted: no model call until a human acts (`wake memory ack|revert`)."""
    return thinking_loop.Thought(
        status="halted", note=f"halted: {state.halt}", error=None, thinking=introspection.Thinking(model=None, stop_reason=StopReason.cloister),
        final_text=None,
    )


async def run_wake(
    session: Session,
    request: WakeRequest,
    *,
    now: Callable[[], dt.datetime] = clock.now,
    dry_run: bool = False,
    source_list: Sequence[Source] | None = None,
) -> WakeOutcome:
    """Run one wake: arrive, bind, manifest, record, gate, think, settle (then any escalation).
    Every log line the wake's code emits, in its own tasks too (the sources, the model client,
    the tools), carries its `agent`, `tier` and `wake_id`.

    The model calls go through the session's client; a session without one (a test's) opens its
    own for this wake and closes it."""
    with logs.wake_fields(agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id)):
        return await _run_wake(session, request, now=now, dry_run=dry_run, source_list=source_list)


async def _run_wake(
    session: Session, request: WakeRequest, *, now: Callable[[], dt.datetime], dry_run: bool, source_list: Sequence[Source] | None,
) -> WakeOutcome:
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
    stale, chain, unreachable = False, None, None
    decision: gate.Decision | None = None
    thought: thinking_loop.Thought | None = None
    own_client = session.models is None
    models = session.models or model.Client()
    try:
        memory_state = await open_memory(config, stores, request, started_at, dry_run=dry_run)
        binding = bind(registry, config, agent_id, tier, halted=memory_state.halt is not None)
        bound.info("bind.done", tools=[t.name for t in binding], bound=len(binding), registry=len(registry))
        tool_hashes = {t.name: manifest.tool_hash(t) for t in binding}
        async with stores.pg_conn() as conn:
            previous, previous_tier = await introspection.previous_both(conn, agent_id, tier, started_at)
        ctx = WakeContext(
            config=config, stores=stores, request=request, now=started_at, binding=tuple(binding), previous=previous,
            previous_tier=previous_tier, tool_hashes=tool_hashes, memory_state=memory_state, dry_run=dry_run,
        )
        blocks, ctx = await arrive(
            ctx, source_list if source_list is not None else tier_sources(config, agent_id, tier), tier_conf.source_timeout_ms / 1000
        )
        wake_diff = ctx.diff
        mani = manifest.of_hashes(agent_id, tier, {b.name: manifest.sha256_text(b.text) for b in blocks}, tool_hashes)
        row_base.update(contents=manifest.contents_of({b.name: b.text for b in blocks}, binding),
                        arrival_order=[b.name for b in arrival.prompt_order(blocks)])
        if dry_run:
            status, note = Status.completed, dry_run_note(ctx)
        else:
            row = _row(row_base, registry, mani, blocks, diff=dict(wake_diff) if wake_diff is not None else None)
            decision, thought = before_model(ctx, blocks, mani)
            if thought is not None:
                # Halted, pre-checked or gated: nothing runs between the row and its settle, so the
                # row is written settled, with its deliveries, in one fenced transaction (step 10).
                status, note, error = Status(thought.status), thought.note, thought.error
                row = dataclasses.replace(row, note=note, error=error)
                chain = await _record_settled(ctx, row, status, thought.thinking, queued_for(ctx, status, thought, mani, now()))
                recorded = settled_inline = True
                bound.info("manifest.recorded", root=mani.root, blocks=len(blocks), tools=len(binding))
            else:
                async with lease.fenced(stores, agent_id, fence) as conn:
                    await introspection.insert(conn, row)
                    await with_row(ctx, conn)
                recorded = True
                bound.info("manifest.recorded", root=mani.root, blocks=len(blocks), tools=len(binding))
                thought = nothing_to_report(tier_conf.ok_token, await think(ctx, blocks, models))
                status, note, error = Status(thought.status), thought.note, thought.error
                if thought.final_text:
                    await record_daybook(ctx, thought.final_text, blocks)
    except asyncio.CancelledError as exc:
        # the canceller's reason when it gave one (the daemon's drain timeout names itself)
        status, error = Status.aborted, str(exc.args[0]) if exc.args and exc.args[0] else "cancelled"
        raise
    except Exception as exc:
        status, error, stale = Status.failed, *_failure(exc, bound)
        unreachable = exc.store if isinstance(exc, StoreUnavailable) else None
    finally:
        if not dry_run and not stale and not settled_inline:  # a stale fence stays stale: its settle would be refused too
            queued = deliver.deliveries(
                config, wake_id=wake_id, agent_id=agent_id, tier=tier, trigger=trigger, status=status,
                final_text=thought.final_text if thought else None, manifest_root=mani.root if mani else None, settled_at=now(),
            )
            settled = _settle(
                stores, recorded, row_base, status, note, error, registry, mani, blocks, thought.thinking if thought else None, queued=queued
            )
            chain = await asyncio.shield(settled)
            recorded = chain is not None or recorded
        if own_client:
            await asyncio.shield(models.aclose())
        duration_ms = clock.monotonic_ms() - started
        bound.info(
            "wake.settled", status=status, note=note, error=error, duration_ms=round(duration_ms, 2), root=mani.root if mani else None, chain=chain,
        )
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
        final_text=thought.final_text if thought else None, escalation_cause=request.cause, escalated=escalated, unreachable=unreachable,
    )


def _failure(exc: Exception, bound: Any) -> tuple[str, bool]:
    """The row's error for a wake that raised, and whether its fence was stale. A stale fence is
    an expected outcome for a process a newer lease holder replaced: `lease.fenced` logged
    `fence.stale` once, and no traceback follows. Anything else is logged `wake.failed` with one."""
    if isinstance(exc, StaleFence):
        return str(exc), True
    bound.exception("wake.failed")
    return logs.redact_text(f"{type(exc).__name__}: {exc}"), False


def dry_run_note(ctx: WakeContext) -> str:
    """A dry run records nothing; what its sources ran without storing is named."""
    unstored = f"; not stored: {', '.join(ctx.unstored)}" if ctx.unstored else ""
    return f"dry run: nothing recorded{unstored}"


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


def before_model(
    ctx: WakeContext, blocks: list[Block], mani: manifest.Manifest
) -> tuple[gate.Decision | None, thinking_loop.Thought | None]:
    """Step 8, before any model call: nothing runs while the Cloister canary halts the wake; then
    the tier's pre-check, then the gate. The thought is None when the model is to be called."""
    if ctx.memory_state.halt is not None:
        return None, halted(ctx.memory_state)
    stopped = prechecked(blocks)
    if stopped is not None:
        return None, stopped
    decision = gate_check(ctx, blocks, mani)
    return decision, None if decision.action == "open" else gated(decision)


async def steps_8_9(
    ctx: WakeContext, blocks: list[Block], mani: manifest.Manifest, models: model.Client
) -> tuple[gate.Decision | None, thinking_loop.Thought]:
    """Steps 8-9: `before_model`, then the model; an `ok_token` answer is quiet."""
    decision, ended = before_model(ctx, blocks, mani)
    if ended is not None:
        return decision, ended
    return decision, nothing_to_report(ctx.tier_config.ok_token, await think(ctx, blocks, models))


def prechecked(blocks: Sequence[Block]) -> thinking_loop.Thought | None:
    """The tier's pre-check decides before the gate and the model: None to go on (it passed, or
    the tier has none), else a quiet wake (exit 1) or a failed one (any other end), no call made."""
    block = next((b for b in blocks if b.name == operator_sources.PRECHECK), None)
    if block is None or block.result == Result.present:
        return None
    spent = introspection.Thinking(model=None, stop_reason=StopReason.precheck)
    if block.result == Result.empty:
        return thinking_loop.Thought(status="quiet", note="pre-check: nothing to do (exit 1)", error=None, thinking=spent, final_text=None)
    return thinking_loop.Thought(status="failed", note="pre-check failed", error=block.reason, thinking=spent, final_text=None)


def nothing_to_report(ok_token: str | None, thought: thinking_loop.Thought) -> thinking_loop.Thought:
    """A completed wake whose whole final answer is the tier's `ok_token` settles `quiet`, with
    its tokens spent and recorded (stop reason `nothing_to_report`, unlike the gate's `gate`), and
    no final text: no daybook entry, no delivery. The token inside other text is an answer."""
    if ok_token is None or thought.status != Status.completed or thought.final_text is None or thought.final_text.strip() != ok_token:
        return thought
    spent = dataclasses.replace(thought.thinking, stop_reason=StopReason.nothing_to_report) if thought.thinking else None
    return thinking_loop.Thought(status="quiet", note=f"nothing to report ({ok_token})", error=None, thinking=spent, final_text=None)


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


async def record_daybook(ctx: WakeContext, text: str, blocks: Sequence[Block] = ()) -> None:
    """The wake's final assistant text is its daybook entry (the `daybook` ledger, which the next
    wakes read), and is kept on the introspection row (`final_text`) as the wake's own summary.
    An entry claiming the absence of what a failed block covers is marked with that block."""
    unchecked = unchecked_claims(ctx, text, blocks)
    async with ctx.write() as conn:
        await introspection.record_final_text(conn, ctx.wake_id, text)
        if unchecked:
            await introspection.record_unchecked_claims(conn, ctx.wake_id, len(unchecked))
        if text.strip():
            await daybook.append(conn, agent_id=ctx.agent_id, wake_id=ctx.wake_id, entry=text, written_at=ctx.now, unchecked_blocks=unchecked)


def unchecked_claims(ctx: WakeContext, text: str, blocks: Sequence[Block]) -> list[str]:
    """The failed blocks whose absence the final text claims (`wake.arrival.absence`), logged."""
    extra = {name: conf.absence_claims for name, conf in ctx.config.sql_sources.items()}
    unchecked = absence.unchecked_claims(text, blocks, extra)
    if unchecked:
        log.warning("daybook.unchecked_absence", agent=ctx.agent_id, wake_id=str(ctx.wake_id), blocks=unchecked)
    return unchecked


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


async def _record_settled(
    ctx: WakeContext, row: introspection.WakeRow, status: str, thinking: introspection.Thinking | None, queued: Sequence[deliver.Delivery],
) -> str | None:
    """The row of a wake that calls no model, written settled with its totals, the arrival's
    writes (`with_row`) and its deliveries, linked into the chain: one fenced transaction. With
    no writes and no deliveries (a quiet whisper) that is a single statement, which checks the
    fence itself: one round trip. Returns the chain link."""
    if not ctx.with_row and not queued:
        async with ctx.stores.pg_conn() as conn:
            try:
                return await introspection.insert(conn, row, status=status, thinking=thinking or introspection.Thinking(model=None))
            except StaleFence as exc:
                lease.refused(row.agent_id, exc)
                raise
    async with lease.fenced(ctx.stores, row.agent_id, row.fence) as conn:
        chain = await introspection.insert(conn, row, status=status, thinking=thinking or introspection.Thinking(model=None))
        await with_row(ctx, conn)
        await deliver.enqueue(conn, row.wake_id, row.agent_id, row.tier, list(queued))
    return chain


def queued_for(
    ctx: WakeContext, status: str, thought: thinking_loop.Thought, mani: manifest.Manifest, settled_at: dt.datetime,
) -> list[deliver.Delivery]:
    """The deliveries of a wake settled at once (`deliver.deliveries`)."""
    return list(deliver.deliveries(
        ctx.config, wake_id=ctx.wake_id, agent_id=ctx.agent_id, tier=ctx.tier, trigger=ctx.request.trigger, status=status,
        final_text=thought.final_text, manifest_root=mani.root, settled_at=settled_at,
    ))


async def _settle(
    stores: Stores, recorded: bool, row_base: dict[str, Any], status: str, note: str | None, error: str | None,
    registry: Registry, mani: manifest.Manifest | None, blocks: list[Block], thinking: introspection.Thinking | None = None,
    queued: Sequence[deliver.Delivery] = (),
) -> str | None:
    """Step 10: close the row with the loop's totals (one statement) and queue its deliveries (or
    write a failed row if the wake died before recording one), linked into the agent's chain, all
    in one fenced transaction. Returns the chain link, or None if nothing was written."""
    try:
        async with lease.fenced(stores, row_base["agent_id"], row_base["fence"]) as conn:
            if recorded:
                chain = await introspection.settle(
                    conn, row_base["wake_id"], status, note=note, error=error, agent_id=row_base["agent_id"], thinking=thinking,
                )
                if chain is not None:  # it was this wake that closed the row
                    await deliver.enqueue(conn, row_base["wake_id"], row_base["agent_id"], row_base["tier"], list(queued))
                return chain
            row = _row(row_base, registry, mani, blocks, note=note, error=error)
            return await introspection.insert(conn, row, status=status)
    except StaleFence as exc:  # a newer lease holder exists: this wake writes nothing more
        log.warning("wake.settle_refused", wake_id=str(row_base["wake_id"]), status=status, fence=exc.fence, newest=exc.newest)
        return None
    except Exception as exc:  # the store itself is gone: the log line is the only witness left
        log.error("wake.settle_failed", wake_id=str(row_base["wake_id"]), status=status, error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
        return None
