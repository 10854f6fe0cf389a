"""One wake, steps 4-10 (docs/design.md, "One wake"), written as the steps in the order they run.

Steps 2-3 (slot claim, lease and fence) are `wake.run.claim`'s; `run_wake` is called
with them done (or, for a dry run, not needed). The memory is opened and audited first
(`wake.arrival.memory_blocks`), then the binding, the arrival with its diff, the manifest; step 7's
decisions are `wake.think.decide`'s, and the row and the settle `wake.run.settle`'s. The model loop
(`wake.think.loop`) runs only for a tier with a model route; without one a wake runs harness-only
and says so on its row. A whisper the gate escalates settles first, then the promoted wake runs
at once (trigger `escalation`, its cause on the row) under the same fence.

Every attempt leaves exactly one row: an exception anywhere settles it `failed` with the error,
a cancellation settles it `aborted`, and an exception before the row exists still writes one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from ledgers import introspection, memory_ledger, queries, tool_flows
from ledgers.introspection import WakeDiff, WakeRow
from ledgers.vocab import Status, Tier, Trigger
from surfaces import memory_tools
from surfaces.registry import Registry, Tool
from wake import clock, logs
from wake.arrival import approval_results, engine, memory_blocks, operator_sources, sources
from wake.arrival.engine import Block, Source
from wake.config import Config
from wake.context import WakeContext, WakeRequest
from wake.errors import StoreUnavailable
from wake.observe import metrics, tracing
from wake.run import mcp_tools, settle
from wake.run.session import Session
from wake.think import approval, client, decide, gate, loop
from wake.witness import diff, flows, manifest


@dataclass(frozen=True, kw_only=True)
class WakeOutcome:
    wake_id: uuid.UUID
    agent_id: str
    tier: Tier
    trigger: Trigger
    status: Status
    blocks: list[Block]
    binding: list[Tool]
    manifest: manifest.Manifest | None
    diff: WakeDiff | None
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
        return engine.render_prompt(self.blocks)


def tier_sources(config: Config, agent_id: str, tier: str) -> list[Source]:
    """The tier's named sources, then those its operator keys add (instructions, pre-check)."""
    conf = config.tier(agent_id, tier)
    return [sources.resolve(config, name) for name in conf.sources] + operator_sources.tier_sources(conf)


def bind(registry: Registry, config: Config, agent_id: str, tier: str, *, halted: bool = False) -> list[Tool]:
    """Step 4: the binding comes from the registry's surface declarations and nothing else; a wake
    the Cloister canary halted binds no tool that mutates, and a tier whose memory is read-only
    (`memory.writable`, false for a whisper unless set) none that writes memory."""
    conf = config.tier(agent_id, tier)
    tools = registry.binding(conf.binds)
    if not conf.memory_writable(tier):
        tools = [t for t in tools if t.name not in memory_tools.WRITING_TOOLS]
    return [t for t in tools if not t.mutates] if halted else tools


async def arrive(ctx: WakeContext, source_list: Sequence[Source], timeout_s: float) -> tuple[list[Block], WakeContext]:
    """Step 5 with its diff, which is itself an arrival block: the direct blocks, the diff
    over them against both previous wakes, then the blocks derived from it (the binding diff, the
    pre-check), in source order; and the context that carries the diff."""
    direct = await engine.assemble(engine.direct(source_list), ctx, timeout_s)
    states = {b.name: b.state(manifest.sha256_text(b.text)) for b in direct}
    ctx = dataclasses.replace(ctx, diff=diff.both(ctx.previous, ctx.previous_tier, ctx.tool_hashes, states))
    derived = await engine.assemble(engine.derived(source_list), ctx, timeout_s)
    return engine.in_source_order(source_list, direct + derived), ctx


async def think(ctx: WakeContext, blocks: list[Block], models: client.Client) -> loop.Thought:
    """Step 9: the model loop over the tier's route; without a route, harness-only (the row says so)."""
    route_name = ctx.tier_config.model
    if route_name is None:
        return loop.Thought(
            status=Status.completed, note="harness-only: no model route is configured for this tier", error=None, thinking=None, final_text=None,
        )
    return await loop.run(ctx, route_name=route_name, route=ctx.config.models[route_name], blocks=blocks, client=models)


@dataclass(kw_only=True)
class _Progress:
    """How far a wake got: what its settle, which runs whatever happened, reads."""

    row: WakeRow
    log: Any  # the wake's bound logger
    blocks: list[Block] = field(default_factory=list)
    binding: list[Tool] = field(default_factory=list)
    manifest: manifest.Manifest | None = None
    diff: WakeDiff | None = None
    decision: gate.Decision | None = None
    thought: loop.Thought | None = None
    status: Status = Status.failed
    recorded: bool = False
    settled: bool = False  # written settled at once (steps 7, 8 and 10 in one transaction)
    stale: bool = False  # a newer lease holder exists: nothing more is written
    chain: str | None = None
    unreachable: str | None = None  # the store a `StoreUnavailable` that ended the wake named

    def ended(self, thought: loop.Thought) -> None:
        self.thought, self.status = thought, thought.status
        self.row = dataclasses.replace(self.row, note=thought.note, error=thought.error)

    def failed(self, status: Status, error: str) -> None:
        self.status, self.row = status, dataclasses.replace(self.row, error=error)


@dataclass(frozen=True, kw_only=True)
class _Read:
    """Step 4's reads of the ledgers, made in one statement: the Cloister canary's (the open
    findings and the last audited commit), the tier's toxic flows, the previous wakes."""

    findings: memory_ledger.OpenFindings
    flows: tool_flows.TierFlows
    previous: introspection.Previous


async def _read_ledgers(conn: asyncpg.Connection, request: WakeRequest, before: dt.datetime, *, recent: int | None, log: Any) -> _Read | None:
    """Step 4's reads in one round trip (none of them depends on another's answer, nor on the
    binding); None when that statement fails: each is then made on its own where it is used, as
    alone it always was, so a canary that cannot read still halts the wake (docs/memory.md)."""
    agent_id, tier = request.agent_id, request.tier
    try:
        findings, flowing, previous = await queries.together(
            conn, memory_ledger.open_view_part(agent_id), tool_flows.tier_flows_part(agent_id, tier),
            introspection.previous_part(agent_id, tier, before, recent=recent),
        )
    except Exception as exc:  # each read, made again on its own, fails (or not) as it would alone
        log.warning("wake.reads_apart", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
        return None
    return _Read(findings=findings, flows=flowing, previous=previous)


async def _bind(
    session: Session, request: WakeRequest, p: _Progress, conn: asyncpg.Connection, *, halted: bool, dry_run: bool,
    flows_read: tool_flows.TierFlows | None,
) -> tuple[mcp_tools.Vetted, flows.Vetted]:
    """Step 4's binding: the tier's declared tools, its MCP tools held to their pins, then the
    tier's toxic-flow policy (docs/tools.md), read (unless `flows_read` holds it already) and
    recorded on `conn`; `p.binding` is what the wake binds."""
    config, registry = session.config, session.registry
    agent_id, tier, started_at = request.agent_id, request.tier, p.row.started_at
    with tracing.span("wake.bind") as span:
        p.binding = bind(registry, config, agent_id, tier, halted=halted)
        vetted = await mcp_tools.vet(conn, registry, p.binding, config.tier(agent_id, tier).binds, started_at, record=not dry_run)  # MCP pins
        flowed = await flows.vet(conn, agent_id, tier, vetted.binding, config.tools.toxic_flows, started_at, record=not dry_run, read=flows_read)
        vetted = dataclasses.replace(vetted, binding=flowed.binding, flow_lines=tuple(flows.block_lines(flowed)))
        p.binding = vetted.binding
        span.set_attributes({"wake.bind.tools": [t.name for t in p.binding], "wake.bind.registry": len(registry)})
    p.log.info("bind.done", tools=[t.name for t in p.binding], bound=len(p.binding), registry=len(registry))
    return vetted, flowed


async def _steps(session: Session, request: WakeRequest, p: _Progress, models: client.Client, dry_run: bool,
                 source_list: Sequence[Source] | None, now: Callable[[], dt.datetime]) -> None:
    """Steps 4-10 of a wake that runs to its end; `run_wake` settles whatever point it reached."""
    config, stores, registry = session.config, session.stores, session.registry
    agent_id, tier, started_at = request.agent_id, request.tier, p.row.started_at
    # 4. the memory, opened and audited before anything reads it, the binding, and the previous
    # wakes: the harness's reads, in one statement, on one connection (a quiet whisper makes no write here)
    named = source_list if source_list is not None else tier_sources(config, agent_id, tier)
    recent = sources.RECENT_WAKES if any(src.fn is sources.recent_wakes for src in named) else None  # read with the previous wakes
    async with stores.pg_conn() as conn:
        read = await _read_ledgers(conn, request, started_at, recent=recent, log=p.log)
        memory_state = await memory_blocks.open_memory(config, stores, request, started_at, dry_run=dry_run, conn=conn,
                                                       found=read.findings if read else None)
        vetted, flowed = await _bind(session, request, p, conn, halted=memory_state.halt is not None, dry_run=dry_run,
                                     flows_read=read.flows if read else None)
        tool_hashes = {t.name: manifest.tool_hash(t) for t in p.binding}
        approvals_on = approval.active(registry)
        chosen = [*named, *mcp_tools.sources(vetted), *([approval_results.SOURCE] if approvals_on else [])]
        previous = read.previous if read else await introspection.previous_both(conn, agent_id, tier, started_at, recent=recent)
    ctx = WakeContext(
        config=config, stores=stores, request=request, now=started_at, binding=tuple(p.binding), previous=previous.agent,
        previous_tier=previous.tier, recent=previous.recent, tool_hashes=tool_hashes, memory_state=memory_state, dry_run=dry_run,
        flow_change=flowed.change,
    )
    # 5. the calls pending past their ttl expired, and the approved calls this wake can run, before
    # the arrival that shows both (a halted wake runs none: they wait); then the arrival, and the diff it carries
    if approvals_on and not dry_run:
        await approval.run_approved(ctx, run=memory_state.halt is None)
    p.blocks, ctx = await arrive(ctx, chosen, ctx.tier_config.source_timeout_ms / 1000)
    p.diff = ctx.diff
    # 6. the manifest, and the row it completes
    with tracing.span("wake.manifest") as span:
        p.manifest = mani = manifest.of_hashes(agent_id, tier, {b.name: manifest.sha256_text(b.text) for b in p.blocks}, tool_hashes)
        p.row = settle.witnessed(p.row, mani, p.blocks, p.binding, p.diff)
        span.set_attributes({"wake.manifest_root": mani.root, "wake.manifest.blocks": len(p.blocks), "wake.manifest.tools": len(p.binding)})
    tracing.manifest_root(mani.root)
    if dry_run:
        p.status, p.row = Status.completed, dataclasses.replace(p.row, note=settle.dry_run_note(ctx))
        return
    # 7. halted, pre-checked or gated: nothing runs between the row and its settle, so the row is
    # written settled, with its deliveries, in one fenced transaction (8 and 10 at once)
    p.decision, ended = decide.before_model(ctx, p.blocks, mani)
    if ended is not None:
        p.ended(ended)
        p.chain = await settle.record_settled(ctx, p.row, p.status, ended.thinking, settle.deliveries(config, p.row, p.status, ended, now()))
        p.recorded = p.settled = True
        p.log.info("manifest.recorded", root=mani.root, blocks=len(p.blocks), tools=len(p.binding))
        return
    # 8. the row, started
    await settle.record(ctx, p.row)
    p.recorded = True
    p.log.info("manifest.recorded", root=mani.root, blocks=len(p.blocks), tools=len(p.binding))
    # 9. think; an answer that is only the tier's ok_token is quiet
    p.ended(decide.nothing_to_report(ctx.tier_config.ok_token, await think(ctx, p.blocks, models)))
    # 10. the daybook (the row's settle is run_wake's, whatever happened)
    if p.thought is not None and p.thought.final_text:
        await settle.record_daybook(ctx, p.thought.final_text, p.blocks)


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
    with tracing.wake_span(wake_id=request.wake_id, agent=request.agent_id, tier=request.tier, trigger=request.trigger,
                           scheduled_for=request.scheduled_for), \
            logs.wake_fields(agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id)):
        return await _run_wake(session, request, now=now, dry_run=dry_run, source_list=source_list)


async def _run_wake(
    session: Session, request: WakeRequest, *, now: Callable[[], dt.datetime], dry_run: bool, source_list: Sequence[Source] | None,
) -> WakeOutcome:
    started = clock.monotonic_ms()
    bound = logs.get("wake.cycle").bind(agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id))
    p = _Progress(row=settle.first_row(session.config, request, now(), len(session.registry)), log=bound)
    scheduled_for = request.scheduled_for.isoformat() if request.scheduled_for else None
    bound.info("wake.started", trigger=request.trigger, scheduled_for=scheduled_for, dry_run=dry_run)
    models = session.models or client.Client()
    try:
        await _steps(session, request, p, models, dry_run, source_list, now)
    except asyncio.CancelledError as exc:
        # the canceller's reason when it gave one (the daemon's drain timeout names itself)
        p.failed(Status.aborted, str(exc.args[0]) if exc.args and exc.args[0] else "cancelled")
        raise
    except Exception as exc:
        error, p.stale = settle.failure(exc, bound)
        p.failed(Status.failed, error)
        p.unreachable = exc.store if isinstance(exc, StoreUnavailable) else None
    finally:
        if not dry_run and not p.stale and not p.settled:  # a stale fence stays stale: its settle would be refused too
            queued = settle.deliveries(session.config, p.row, p.status, p.thought, now())
            thinking = p.thought.thinking if p.thought else None
            p.chain = await settle.settle(session.stores, p.row, recorded=p.recorded, status=p.status, thinking=thinking, queued=queued)
            p.recorded = p.chain is not None or p.recorded
        if session.models is None:
            await asyncio.shield(models.aclose())
        duration_ms = clock.monotonic_ms() - started
        tracing.wake_status(p.status, p.row.error)
        _settled(p, request, duration_ms, dry_run)
    return _outcome(p, request, duration_ms, await _escalate(session, request, p, now))


def _settled(p: _Progress, request: WakeRequest, duration_ms: float, dry_run: bool) -> None:
    """The wake's last log line (`wake.settled`, with its chain link) and its metrics."""
    root = p.manifest.root if p.manifest else None
    p.log.info("wake.settled", status=p.status, note=p.row.note, error=p.row.error, duration_ms=round(duration_ms, 2), root=root, chain=p.chain)
    if not dry_run:
        spent = p.thought.thinking if p.thought else None
        metrics.observe_settled(request.agent_id, request.tier, p.status, duration_ms / 1000, spent, spent.refusals if spent else 0)


async def _escalate(session: Session, request: WakeRequest, p: _Progress, now: Callable[[], dt.datetime]) -> WakeOutcome | None:
    """A whisper the gate escalated, once settled `completed`: the promoted wake runs now, under the same fence."""
    decision = p.decision
    if decision is None or decision.action != "escalate" or not p.recorded or p.status != Status.completed:
        return None
    assert decision.to is not None
    promoted = WakeRequest(
        agent_id=request.agent_id, tier=Tier(decision.to), trigger=Trigger.escalation, fence=request.fence,
        cause=f"whisper {str(request.wake_id)[:8]}: {decision.reason}",
    )
    return await run_wake(session, promoted, now=now)


def _outcome(p: _Progress, request: WakeRequest, duration_ms: float, escalated: WakeOutcome | None) -> WakeOutcome:
    thought = p.thought
    return WakeOutcome(
        wake_id=request.wake_id, agent_id=request.agent_id, tier=request.tier, trigger=request.trigger, status=p.status, blocks=p.blocks,
        binding=p.binding, manifest=p.manifest, diff=p.diff, note=p.row.note, error=p.row.error, recorded=p.recorded, duration_ms=duration_ms,
        gate=p.decision.reason if p.decision else None, thinking=thought.thinking if thought else None,
        final_text=thought.final_text if thought else None, escalation_cause=request.cause, escalated=escalated,
        unreachable=p.unreachable,
    )
