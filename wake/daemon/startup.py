"""What the daemon does once, as it starts, and the engines it keeps running: the pass over the
rows and claims a dead process left (before any slot is scheduled), the workspaces warmed for the
first facts check, the heap frozen once start-up is done, and the embedded engines watched."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gc
import socket
from collections.abc import Awaitable, Callable

from ledgers import dead_processes, introspection
from wake import logs
from wake.arrival import code_check
from wake.config import Config
from wake.errors import LeaseBusy
from wake.observe import metrics
from wake.run import claim, unrun
from wake.run.session import Session
from wake.stores import engines

log = logs.get("wake.daemon")

ENGINE_CHECK_S = 1.0  # how often the daemon looks at its embedded engines' pids (a file read each)
DEAD_ON_HOST = "abandoned: its process died on this host before settling (closed at the daemon's start)"


def settle_heap() -> None:
    """Start-up is done: collect once, then freeze what survived (config, schedules, jobs, the
    registry) out of the collector's reach, so later full collections do not walk it all (they
    blocked the loop for ~100 ms at 3,000 jobs)."""
    gc.collect()
    gc.freeze()


def agent_infos(config: Config) -> dict[str, metrics.AgentInfo]:
    """What the metrics know of each configured agent (their labels are bounded to these)."""
    return {
        a: metrics.AgentInfo(tiers=tuple(x.tiers), daily_cost_cap_usd=x.daily_cost_cap_usd, timezone=x.timezone)
        for a, x in config.agents.items()
    }


async def close_abandoned(session: Session, *, owner: str, now: dt.datetime, close_unrecorded: Callable[[], Awaitable[None]]) -> None:
    """Rows left `started` by a process that is dead on this host are closed at once
    (`ledgers.dead_processes`); the others once their lease has expired: take each such agent's
    lease (if free) and close them under the new fence. Between the two, the claims a dead
    claimer left get their rows (`wake.run.unrun`, `close_unrecorded`)."""
    host = socket.gethostname()
    async with session.stores.pg_conn() as conn:
        for agent_id, pids in (await dead_processes.dead_on_host(conn, host, engines.alive)).items():
            for row in await dead_processes.abandon_dead(conn, agent_id, host, pids, DEAD_ON_HOST):
                metrics.observe_abandoned(agent_id, row["tier"])
                log.warning("wake.abandoned", agent=agent_id, wake_id=str(row["wake_id"]), host=host, pid=row["pid"], fence=row["fence"],
                            closed_by="start-up: its process is dead on this host")
        agents = await introspection.agents_with_started(conn)
    await unrun.dead_claims(session, host=host, alive=engines.alive, now=now)
    await close_unrecorded()
    for agent_id in agents:
        with contextlib.suppress(LeaseBusy):
            async with claim.agent_lease(session.config, session.stores, agent_id, owner=owner):
                pass


def warm_workspaces(config: Config) -> None:
    """Start building each agent's workspace fingerprint now (in the background), so that the
    first wake's facts check finds it ready instead of spending its budget on the build."""
    for agent_id in config.agents:
        ws = code_check.workspace_of(config, agent_id)
        if ws is not None:
            ws.warm()
            log.info("workspace.warming", agent=agent_id, root=str(ws.root))


async def engine_loop(config: Callable[[], Config], embedded: tuple[str, ...]) -> None:
    """Supervise the embedded engines: every ENGINE_CHECK_S, one that is not running is started
    again (`engine.restarted`, `wake_engine_restarts_total`); the slots that fired while it was
    away have their rows (`failed`: the lease could not be taken; `missed`: PostgreSQL was
    away), and the clients reconnect on their next call."""
    state_dir = config().state_dir_path()
    start = {"postgres": engines.start_postgres, "redis": engines.start_redis}
    while True:
        await asyncio.sleep(ENGINE_CHECK_S)
        running = await asyncio.to_thread(engines.engine_pids, state_dir)
        for name in embedded:
            if name in running:
                continue
            try:
                await asyncio.to_thread(start[name], state_dir, idle_s=config().engines.idle_s)
            except Exception as exc:  # noqa: BLE001 - tried again on the next round; never the daemon's end
                log.error("engine.restart_failed", engine=name, error=f"{type(exc).__name__}: {exc}")
