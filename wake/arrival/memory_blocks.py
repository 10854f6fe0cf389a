"""The agent's memory at arrival (docs/memory.md): opened and audited first, then its two blocks.

`open_memory` runs before every other source: it opens the repository (created on first use)
and runs the Cloister canary over what changed since its last audit. The `memory` and `cloister`
blocks read what the wake's start found (`WakeContext.memory_state`): the repository the canary has
just audited, and whether the canary could run at all. `memory` is the file tree with each file's
description, within `agents.<id>.memory.block_max_chars` and with the exact totals, then the
newest commits with where their text came from (the model, a tool result, a human, the operator:
`memory.provenance`, read from each commit's trailers); `cloister`
lists the open findings of every level (as the canary read them, when it recorded nothing new: the
same round trip). A canary that could not run fails both blocks ("could not
check: ..."), so an unaudited memory never reads as an empty one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Awaitable, Callable

import asyncpg

from ledgers import memory_ledger
from ledgers.errors import StaleFence
from memory.repo import MemoryRepo
from untrusted import spotlight
from wake import logs
from wake.arrival import memory_render
from wake.arrival.engine import Found
from wake.config import Config
from wake.context import MemoryState, WakeContext, WakeRequest
from wake.errors import CanaryFailed, Disabled
from wake.stores import Stores, lease

log = logs.get("wake.cycle")

RECENT_CHANGES = 5  # the newest commits the memory block names, each with where its text came from


async def open_memory(
    config: Config, stores: Stores, request: WakeRequest, now: dt.datetime, *, dry_run: bool, conn: asyncpg.Connection | None = None,
    found: memory_ledger.OpenFindings | None = None,
) -> MemoryState:
    """Before the arrival: open the agent's memory (created on first use) and run the Cloister
    canary over what changed since its last audit. An open HALT, or a canary that cannot run,
    halts the wake: it still arrives and records, but binds no writing tool and calls no model.
    A dry run audits nothing (it records nothing) and creates no repository. `conn`: the
    connection it reads and records on (the wake's, which goes on using it: no second connection
    is taken while it is held); None: a pooled one each time. `found`: the canary's read
    (`memory_ledger.open_view`) made already, with the wake's other reads; None: made here."""
    agent_id = request.agent_id
    if not config.agents[agent_id].memory.enabled:
        return MemoryState()
    path = config.memory_path(agent_id)

    def reading() -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        return contextlib.nullcontext(conn) if conn is not None else stores.pg_conn()

    def writing() -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        return lease.fenced_on(conn, agent_id, request.fence) if conn is not None else lease.fenced(stores, agent_id, request.fence)

    try:
        if dry_run and not (path / ".git").exists():
            return MemoryState(enabled=True)
        repo = MemoryRepo.open(path, config.memory_config(agent_id), at=now)
        if dry_run:
            return MemoryState(enabled=True, repo=repo, halt=await _halt_reason(reading, agent_id, found))
        result = await memory_ledger.run_canary(
            reading, writing, repo, agent_id=agent_id, wake_id=request.wake_id, at=now, found=found,
        )
        halt = await _halt_reason(reading, agent_id, result.open) if result.has_open_halt else None  # open: read, and nothing recorded since
        return MemoryState(enabled=True, repo=repo, canary=result, halt=halt)
    except StaleFence:
        raise
    except Exception as exc:  # git, the file system or the ledger: the canary could not look, so nothing is trusted
        error = logs.redact_text(f"{type(exc).__name__}: {exc}")
        log.error("cloister.failed", agent=agent_id, wake_id=str(request.wake_id), error=error)
        return MemoryState(enabled=True, error=error, halt=f"cloister could not run: {error}")


async def _halt_reason(
    reading: Callable[[], contextlib.AbstractAsyncContextManager[asyncpg.Connection]], agent_id: str, found: memory_ledger.OpenFindings | None,
) -> str | None:
    """Why the wake halts: over the open findings as read already, when they still are; else read now."""
    if found is not None:
        return memory_ledger.halt_reason_in(found)
    async with reading() as c:
        return await memory_ledger.halt_reason(c, agent_id)


def _checked(ctx: WakeContext) -> None:
    state = ctx.memory_state
    if not state.enabled:
        raise Disabled("memory is off for this agent (agents.<id>.memory.enabled)")
    if state.error is not None:
        raise CanaryFailed(state.error)


def memory_tree(ctx: WakeContext) -> Found | Awaitable[Found]:
    _checked(ctx)
    repo = ctx.memory_state.repo
    if repo is None:  # a dry run before the first wake: nothing has created the repository
        return Found(text="memory: no repository yet; the first wake creates it", rows=0)

    def shown(view: memory_ledger.OpenFindings) -> Found:
        quarantined = {r.path: r.rule for r in view.rows if r.path}  # a file with an open finding shows its finding, not its description
        block = memory_render.memory_block(repo.ls(), head=repo.head(), max_chars=ctx.agent.memory.block_max_chars,
                                           recent=repo.log(limit=RECENT_CHANGES), marks=spotlight.for_agent(ctx.agent_id),
                                           quarantined=quarantined)
        return Found(text=block.text, rows=block.total)

    return _with_findings(ctx, shown)


def _with_findings(ctx: WakeContext, render: Callable[[memory_ledger.OpenFindings], Found]) -> Found | Awaitable[Found]:
    """`render` over the open findings: at once over those the canary read, or, when it recorded
    something (or did not run), after reading them as they are now."""
    canary = ctx.memory_state.canary
    view = canary.open if canary is not None else None
    return render(view) if view is not None else _read_findings(ctx, render)


async def _read_findings(ctx: WakeContext, render: Callable[[memory_ledger.OpenFindings], Found]) -> Found:
    async with ctx.stores.pg_conn() as conn:  # wake's own reads: the light reset (docs/performance.md)
        view = await memory_ledger.open_view(conn, ctx.agent_id)
    return render(view)


def cloister(ctx: WakeContext) -> Found | Awaitable[Found]:
    _checked(ctx)

    def shown(view: memory_ledger.OpenFindings) -> Found:
        block = memory_render.cloister_block(view.rows, total=view.total, counts=view.counts, marks=spotlight.for_agent(ctx.agent_id))
        return Found(text=block.text, rows=view.total)

    return _with_findings(ctx, shown)
