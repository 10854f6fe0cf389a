"""A wake's one row (step 7) and its settle (step 10): the row, the daybook, the deliveries.

The row is a `WakeRow` made once when the wake starts (`first_row`: the request and who ran it)
and completed with what the wake witnessed (`witnessed`: the manifest, the block states, the
contents, the diff); `dataclasses.replace` adds the note and error it ends with. A wake that calls
no model writes it already settled, with its deliveries (`record_settled`); one that thinks writes
it `started` (`record`) and closes it after the loop (`settle`), which also writes a failed row for
a wake that died before recording one. Every write is fenced; a stale fence writes nothing more.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import socket
from collections.abc import Sequence
from typing import Any

import asyncpg

from ledgers import daybook, introspection
from ledgers.errors import StaleFence
from ledgers.introspection import Thinking, WakeDiff, WakeRow
from ledgers.vocab import Status
from surfaces.registry import Tool
from wake import __version__, logs
from wake.arrival import absence, engine
from wake.arrival.engine import Block
from wake.config import Config
from wake.context import WakeContext, WakeRequest
from wake.observe import tracing
from wake.run import deliver, incident_policy
from wake.stores import Stores, lease
from wake.think.loop import Thought
from wake.witness import manifest

log = logs.get("wake.cycle")


def provenance(config: Config) -> dict[str, Any]:
    """Who wrote a ledger row: host, pid, code version, config hash (the `WakeRow` fields)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "version": __version__, "config_hash": config.config_hash()}


def first_row(config: Config, request: WakeRequest, started_at: dt.datetime, registry_size: int) -> WakeRow:
    """The row as the wake's start knows it: what was asked, who runs it; no manifest yet."""
    return WakeRow(
        wake_id=request.wake_id, agent_id=request.agent_id, tier=request.tier, trigger=request.trigger, scheduled_for=request.scheduled_for,
        started_at=started_at, fence=request.fence, escalation_cause=request.cause, registry_tool_count=registry_size, **provenance(config),
        trace_id=tracing.trace_id(),
    )


def witnessed(row: WakeRow, mani: manifest.Manifest, blocks: Sequence[Block], binding: Sequence[Tool], wake_diff: WakeDiff | None) -> WakeRow:
    """The row with what the wake saw and held (steps 4-7): the manifest, each block's state, the
    contents behind the hashes, the prompt order and the diff."""
    return dataclasses.replace(
        row, manifest_root=mani.root, blocks={b.name: b.state(mani.blocks[b.name]) for b in blocks}, tool_hashes=mani.tools,
        contents=manifest.contents_of({b.name: b.text for b in blocks}, list(binding)),
        arrival_order=[b.name for b in engine.prompt_order(blocks)], diff=wake_diff,
    )


def deliveries(config: Config, row: WakeRow, status: Status, thought: Thought | None, settled_at: dt.datetime) -> list[deliver.Delivery]:
    """What the wake queues as it settles `status` (`deliver.deliveries`)."""
    return deliver.deliveries(
        config, wake_id=row.wake_id, agent_id=row.agent_id, tier=row.tier, trigger=row.trigger, status=status,
        final_text=thought.final_text if thought else None, manifest_root=row.manifest_root, settled_at=settled_at,
    )


async def with_row(ctx: WakeContext, conn: asyncpg.Connection) -> None:
    """The writes the arrival left for the wake's row (`WakeContext.with_row`), in the row's own
    transaction; one that fails is logged and rolled back to its savepoint, and the wake goes on."""
    for write in ctx.with_row:
        try:
            async with conn.transaction():
                await write(conn)
        except (asyncpg.PostgresError, ValueError) as exc:
            log.warning("wake.row_write_failed", agent=ctx.agent_id, wake_id=str(ctx.wake_id), error=logs.redact_text(f"{type(exc).__name__}: {exc}"))


async def record(ctx: WakeContext, row: WakeRow) -> None:
    """Step 7 for a wake that will think: the row `started`, and the arrival's writes, fenced."""
    async with lease.fenced(ctx.stores, row.agent_id, row.fence) as conn:
        await introspection.insert(conn, row)
        await with_row(ctx, conn)


async def record_settled(ctx: WakeContext, row: WakeRow, status: Status, thinking: Thinking | None, queued: Sequence[deliver.Delivery]) -> str | None:
    """The row of a wake that calls no model, written settled with its totals, the arrival's
    writes (`with_row`) and its deliveries, linked into the chain: one fenced transaction. With
    no writes and no deliveries (a quiet whisper) that is a single statement, which checks the
    fence itself and reads whether the tier has an open incident to close: one round trip when it
    has none. Returns the chain link."""
    if not ctx.with_row and not queued:
        async with ctx.stores.pg_conn() as conn:
            try:
                written = await introspection.insert_settled(conn, row, status=status, thinking=thinking or Thinking(model=None))
                await incident_policy.witness(conn, ctx.config, wake_id=row.wake_id, agent_id=row.agent_id, tier=row.tier, status=status,
                                        error=row.error, note=row.note, at=row.started_at, incidents_open=written.incidents_open)
                return written.chain
            except StaleFence as exc:
                lease.refused(row.agent_id, exc)
                raise
    async with lease.fenced(ctx.stores, row.agent_id, row.fence) as conn:
        chain = await introspection.insert(conn, row, status=status, thinking=thinking or Thinking(model=None))
        await with_row(ctx, conn)
        await deliver.enqueue(conn, row.wake_id, row.agent_id, row.tier, list(queued))
        await incident_policy.witness(conn, ctx.config, wake_id=row.wake_id, agent_id=row.agent_id, tier=row.tier, status=status,
                                error=row.error, note=row.note, at=row.started_at)
    return chain


async def settle(
    stores: Stores, row: WakeRow, *, recorded: bool, status: Status, thinking: Thinking | None, queued: Sequence[deliver.Delivery],
) -> str | None:
    """Step 10: close the row with the loop's totals (one statement) and queue its deliveries (or
    write a failed row if the wake died before recording one), linked into the agent's chain, all
    in one fenced transaction, shielded from cancellation. Returns the chain link, or None if
    nothing was written."""
    return await asyncio.shield(_settle(stores, row, recorded=recorded, status=status, thinking=thinking, queued=queued))


async def _settle(
    stores: Stores, row: WakeRow, *, recorded: bool, status: Status, thinking: Thinking | None, queued: Sequence[deliver.Delivery],
) -> str | None:
    try:
        async with lease.fenced(stores, row.agent_id, row.fence) as conn:
            if not recorded:
                chain = await introspection.insert(conn, row, status=status)
            else:
                chain = await introspection.settle(
                    conn, row.wake_id, status, note=row.note, error=row.error, agent_id=row.agent_id, thinking=thinking,
                )
                if chain is not None:  # it was this wake that closed the row
                    await deliver.enqueue(conn, row.wake_id, row.agent_id, row.tier, list(queued))
            if chain is not None:
                await incident_policy.witness(conn, stores.config, wake_id=row.wake_id, agent_id=row.agent_id, tier=row.tier, status=status,
                                        error=row.error, note=row.note, at=row.started_at)
            return chain
    except StaleFence as exc:  # a newer lease holder exists: this wake writes nothing more
        log.warning("wake.settle_refused", wake_id=str(row.wake_id), status=status, fence=exc.fence, newest=exc.newest)
        return None
    except Exception as exc:  # the store itself is gone: the log line is the only witness left
        log.error("wake.settle_failed", wake_id=str(row.wake_id), status=status, error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
        return None


def failure(exc: Exception, bound: Any) -> tuple[str, bool]:
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


async def record_daybook(ctx: WakeContext, text: str, blocks: Sequence[Block] = ()) -> None:
    """The wake's final assistant text is its daybook entry (the `daybook` ledger, which the next
    wakes read), and is kept on the introspection row (`final_text`) as the wake's own summary.
    An entry claiming the absence of what a failed block covers is marked with that block."""
    unchecked = unchecked_claims(ctx, text, blocks)
    async with ctx.harness_write() as conn:  # the wake's row is the control plane, which tool code may not write
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
