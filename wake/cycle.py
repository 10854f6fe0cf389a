"""One wake, step by step (DESIGN "One wake"). This module reads like the steps it runs.

Steps 1-3 (trigger, slot claim, lease and fence) belong to the daemon; `run_wake` is called
with them done (or, for a manual wake, not needed). Steps 4-7 and 10 are here; step 8 (the gate)
and step 9 (the model loop) arrive with the thinking issue: until then a wake runs harness-only
and says so on its row.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgers import introspection
from surfaces.registry import Registry, Tool
from ledgers.fences import StaleFence
from wake import __version__, arrival, clock, diff, lease, logs, manifest, sources
from wake.arrival import Block, Source
from wake.config import Config
from wake.stores import Stores

log = logs.get("wake.cycle")


@dataclass(frozen=True, kw_only=True)
class WakeContext:
    """What sources and tools see of the wake they run in."""

    config: Config
    stores: Stores
    agent_id: str
    tier: str
    trigger: str
    scheduled_for: dt.datetime | None
    wake_id: uuid.UUID
    now: dt.datetime
    binding: tuple[Tool, ...]
    previous: dict[str, Any] | None
    previous_tier: dict[str, Any] | None
    tool_hashes: dict[str, str]
    fence: int | None = None
    earlier: tuple[Block, ...] = ()
    diff: dict[str, Any] = field(default_factory=dict)

    @property
    def timezone(self) -> str:
        return self.config.agents[self.agent_id].timezone

    def write(self) -> Any:
        """`async with ctx.write() as conn:` — a transaction that writes only while this wake's
        fence is the agent's newest (raises `ledgers.fences.StaleFence` otherwise). Every write a
        wake, a source or a tool makes to PostgreSQL goes through here."""
        return lease.fenced(self.stores, self.agent_id, self.fence)


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
    diff: dict[str, Any] | None
    prompt: str
    note: str | None
    error: str | None
    recorded: bool
    duration_ms: float


def tier_sources(config: Config, agent_id: str, tier: str) -> list[Source]:
    return [sources.BUILTIN[name] for name in config.tier(agent_id, tier).sources]


def _with_diff(ctx: WakeContext, earlier: list[Block]) -> WakeContext:
    states = {b.name: b.state(manifest.sha256_text(b.text)) for b in earlier}
    return dataclasses.replace(
        ctx,
        earlier=tuple(earlier),
        diff={
            "agent": diff.compare(ctx.previous, ctx.tool_hashes, states),
            "tier": diff.compare(ctx.previous_tier, ctx.tool_hashes, states),
        },
    )


async def arrive(ctx: WakeContext, source_list: Sequence[Source], timeout_s: float) -> tuple[list[Block], dict[str, Any]]:
    """Step 4 (and the diff of step 7, which is itself an arrival block)."""
    seen: dict[str, Any] = {}

    def with_earlier(c: Any, earlier: list[Block]) -> Any:
        later = _with_diff(c, earlier)
        seen["diff"] = later.diff
        return later

    blocks = await arrival.assemble(source_list, ctx, timeout_s, with_earlier=with_earlier)
    return blocks, seen["diff"]


def bind(registry: Registry, config: Config, agent_id: str, tier: str) -> list[Tool]:
    """Step 5: the binding comes from the registry's surface declarations and nothing else."""
    return registry.binding(config.tier(agent_id, tier).binds)


async def run_wake(
    *,
    config: Config,
    stores: Stores,
    registry: Registry,
    agent_id: str,
    tier: str,
    trigger: str = "manual",
    scheduled_for: dt.datetime | None = None,
    now: Callable[[], dt.datetime] = clock.now,
    dry_run: bool = False,
    source_list: Sequence[Source] | None = None,
    fence: int | None = None,
    wake_id: uuid.UUID | None = None,
) -> WakeOutcome:
    """Run one wake: arrive, bind, manifest, record, (think), settle. `wake_id` lets a caller
    (the daemon, reporting to `wake trigger`) know the id before the wake starts."""
    tier_conf = config.tier(agent_id, tier)
    wake_id = wake_id or uuid.uuid4()
    started_at = now()
    started = clock.monotonic_ms()
    bound = logs.get("wake.cycle").bind(agent=agent_id, tier=tier, wake_id=str(wake_id))
    bound.info("wake.started", trigger=trigger, scheduled_for=scheduled_for.isoformat() if scheduled_for else None, dry_run=dry_run)
    row_base = dict(
        wake_id=wake_id, agent_id=agent_id, tier=tier, trigger=trigger, scheduled_for=scheduled_for, started_at=started_at,
        host=socket.gethostname(), pid=os.getpid(), version=__version__, config_hash=config.config_hash(), fence=fence,
    )
    recorded = False
    blocks: list[Block] = []
    binding: list[Tool] = []
    mani: manifest.Manifest | None = None
    wake_diff: dict[str, Any] | None = None
    status, note, error = "failed", None, None
    try:
        binding = bind(registry, config, agent_id, tier)
        bound.info("bind.done", tools=[t.name for t in binding], bound=len(binding), registry=len(registry))
        tool_hashes = {t.name: manifest.sha256_declaration(t.declaration()) for t in binding}
        async with stores.pg_conn() as conn:
            previous = await introspection.previous_settled(conn, agent_id, None, started_at)
            previous_tier = await introspection.previous_settled(conn, agent_id, tier, started_at)
        ctx = WakeContext(
            config=config, stores=stores, agent_id=agent_id, tier=tier, trigger=trigger, scheduled_for=scheduled_for,
            wake_id=wake_id, now=started_at, binding=tuple(binding), previous=previous, previous_tier=previous_tier,
            tool_hashes=tool_hashes, fence=fence,
        )
        blocks, wake_diff = await arrive(ctx, source_list if source_list is not None else tier_sources(config, agent_id, tier), tier_conf.source_timeout_ms / 1000)
        mani = manifest.build(agent_id, tier, {b.name: b.text for b in blocks}, {t.name: t.declaration() for t in binding})
        if dry_run:
            status, note = "completed", "dry run: nothing recorded"
        else:
            row = _row(row_base, registry, mani, blocks, diff=wake_diff)
            async with lease.fenced(stores, agent_id, fence) as conn:
                await introspection.insert(conn, row)
            recorded = True
            bound.info("manifest.recorded", root=mani.root, blocks=len(blocks), tools=len(binding))
            status, note = await think(config, agent_id, tier)
    except asyncio.CancelledError:
        status, error = "aborted", "cancelled"
        raise
    except Exception as exc:
        status, error = "failed", logs.redact_text(f"{type(exc).__name__}: {exc}")
        bound.exception("wake.failed")
    finally:
        if not dry_run:
            recorded = await asyncio.shield(_settle(stores, recorded, row_base, status, note, error, registry, mani, blocks)) or recorded
        duration_ms = clock.monotonic_ms() - started
        bound.info("wake.settled", status=status, note=note, error=error, duration_ms=round(duration_ms, 2), root=mani.root if mani else None)
    return WakeOutcome(
        wake_id=wake_id, agent_id=agent_id, tier=tier, trigger=trigger, status=status, blocks=blocks, binding=binding,
        manifest=mani, diff=wake_diff, prompt=arrival.render_prompt(blocks), note=note, error=error, recorded=recorded,
        duration_ms=duration_ms,
    )


async def record_skipped(
    *, config: Config, stores: Stores, agent_id: str, tier: str, trigger: str, scheduled_for: dt.datetime | None,
    wake_id: uuid.UUID, reason: str, now: dt.datetime,
) -> None:
    """The row of a scheduled wake that did not run (e.g. `busy`: another wake held the lease).
    Unfenced: its writer holds no lease, and the slot claim already makes it the slot's only row."""
    row = introspection.WakeRow(
        wake_id=wake_id, agent_id=agent_id, tier=tier, trigger=trigger, scheduled_for=scheduled_for, started_at=now,
        manifest_root=None, host=socket.gethostname(), pid=os.getpid(), version=__version__,
        config_hash=config.config_hash(), note=f"skipped: {reason}",
    )
    async with stores.pg_conn() as conn:
        await introspection.insert(conn, row, status="skipped")
    log.info("wake.skipped", agent=agent_id, tier=tier, wake_id=str(wake_id), reason=reason, scheduled_for=scheduled_for.isoformat() if scheduled_for else None)


async def think(config: Config, agent_id: str, tier: str) -> tuple[str, str]:
    """Steps 8-9 placeholder: no model call yet; the row says so."""
    route = config.tier(agent_id, tier).model
    if route is None:
        return "completed", "harness-only: no model route is configured for this tier"
    return "completed", f"harness-only: this version calls no model (route {route!r} is configured but unused)"


def _row(
    row_base: dict[str, Any], registry: Registry, mani: manifest.Manifest | None, blocks: list[Block], **extra: Any
) -> introspection.WakeRow:
    """The ledger row of this attempt; without a manifest it records no blocks and no tools."""
    return introspection.WakeRow(
        **row_base, manifest_root=mani.root if mani else None,
        blocks={b.name: b.state(mani.blocks[b.name]) for b in blocks} if mani else {},
        tool_hashes=mani.tools if mani else {}, registry_tool_count=len(registry), **extra,
    )


async def _settle(
    stores: Stores, recorded: bool, row_base: dict[str, Any], status: str, note: str | None, error: str | None,
    registry: Registry, mani: manifest.Manifest | None, blocks: list[Block],
) -> bool:
    """Step 10: close the row; write a failed row if the wake died before recording one."""
    try:
        async with lease.fenced(stores, row_base["agent_id"], row_base["fence"]) as conn:
            if recorded:
                await introspection.settle(conn, row_base["wake_id"], status, note=note, error=error)
                return True
            row = _row(row_base, registry, mani, blocks, note=note, error=error)
            await introspection.insert(conn, row, status=status)
            return True
    except StaleFence as exc:  # a newer lease holder exists: this wake writes nothing more
        log.warning("wake.settle_refused", wake_id=str(row_base["wake_id"]), status=status, fence=exc.fence, newest=exc.newest)
        return False
    except Exception:  # the store itself is gone: the log line is the only witness left
        log.exception("wake.settle_failed", wake_id=str(row_base["wake_id"]), status=status)
        return False
