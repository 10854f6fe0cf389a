"""The daemon's sweep for wakes a dead replica claimed and never recorded (`wake.run.unrun`):
one-shots claimed in `wake_oneshots`, and `wake trigger` requests left on a dead replica's list of
taken requests (`wake.daemon.control`). Each gets its one row, `failed` (claimed, never run); a trigger's requester, if
it still waits, is told so."""

from __future__ import annotations

import datetime as dt
import socket

import redis.asyncio as aioredis

from ledgers.vocab import Status, Tier, Trigger
from wake import logs
from wake.daemon import control
from wake.run import unrun
from wake.run.session import Session
from wake.stores import engines

log = logs.get("wake.orphans")


async def sweep(session: Session, *, replica_id: str, heartbeat_ttl_s: float, now: dt.datetime) -> None:
    """One sweep; a store that is away is logged and tried again at the next."""
    redis = session.stores.redis
    try:
        beating: set[str] | None = {r.replica_id for r in await control.live_replicas(redis)}
    except Exception as exc:  # noqa: BLE001 - Redis away: only this host's dead pids are known
        log.warning("orphans.replicas_unreadable", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
        beating = None
    live = unrun.Liveness(host=socket.gethostname(), alive=engines.alive, live_replicas=beating, heartbeat_ttl_s=heartbeat_ttl_s)
    try:
        await unrun.close_unrecorded(session, live, now)
        if beating is not None:
            await close_triggers(session, redis, live, replica_id)
    except Exception as exc:  # noqa: BLE001 - PostgreSQL or Redis away: the next sweep tries again
        log.warning("orphans.sweep_failed", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))


async def close_triggers(session: Session, redis: aioredis.Redis, live: unrun.Liveness, by: str) -> int:
    """Take over the requests of every dead replica's taken list, one by one, and give each its
    row; returns how many rows were written."""
    written = 0
    for holder in await control.taken_lists(redis):
        how = unrun.dead_because(holder, None, dt.datetime.now(dt.UTC), live) if holder != by else None
        if how is None:
            continue
        while (request := await control.take_over(redis, holder, by)) is not None:
            agent = session.config.agents.get(request.agent)
            if agent is not None and request.tier in agent.tiers:
                row = unrun.unrecorded_row(
                    wake_id=request.wake_id, agent_id=request.agent, tier=Tier(request.tier), trigger=Trigger.manual,
                    started_at=request.requested_at, claimer=holder, how=how,
                )
                if await unrun.claimer_died(session, row, claimer=holder, oneshot=False) is not None:
                    written += 1
                    settled = {"event": "settled", "wake_id": str(row.wake_id), "status": Status.failed, "note": None, "error": row.error}
                    await control.report(redis, request.request_id, settled)
            await control.done(redis, by, request)
    return written
