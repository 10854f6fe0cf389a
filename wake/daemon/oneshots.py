"""One-shot wakes (`wake at`): every due one is handed to a task and claimed on its own
`wake_oneshots` row, so exactly one replica runs it; once a heartbeat's lifetime, the one-shots and
trigger requests a dead claimer left get their rows (`wake.daemon.dead_claimers`)."""

from __future__ import annotations

import asyncio

from ledgers import controls
from ledgers.vocab import NO_WAIT_TIERS, Tier, Trigger
from wake import logs
from wake.context import WakeRequest
from wake.daemon.running import Host

log = logs.get("wake.daemon")


async def loop(daemon: Host) -> None:
    """Hand every due one-shot (`wake at`) to a task; its claim decides which replica runs it.
    Once a heartbeat's lifetime, give the one-shots a dead claimer left their rows."""
    unknown: set[object] = set()
    swept = daemon.now()
    while not daemon.stopping:
        if (daemon.now() - swept).total_seconds() >= daemon.heartbeat_ttl_s:
            swept = daemon.now()
            await daemon.close_unrecorded()
        try:
            async with daemon.live.session.stores.pg_conn() as conn:
                due = await controls.due_oneshots(conn, daemon.now())
        except Exception as exc:  # PostgreSQL away: the one-shots wait in their table
            log.warning("oneshot.poll_failed", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
            due = []
        for shot in due:
            agent = daemon.config.agents.get(shot.agent_id)
            if agent is None or shot.tier not in agent.tiers:
                if shot.wake_id not in unknown:
                    unknown.add(shot.wake_id)
                    log.warning("oneshot.unconfigured", agent=shot.agent_id, tier=shot.tier, wake_id=str(shot.wake_id))
                continue
            if shot.wake_id not in daemon.oneshots_running and not daemon.stopping:
                daemon.oneshots_running.add(shot.wake_id)
                daemon._spawn(run(daemon, shot), name=f"at:{shot.agent_id}/{shot.tier}:{shot.wake_id}")
        await asyncio.sleep(daemon.config.daemon.poll_s)


async def run(daemon: Host, shot: controls.OneShot) -> None:
    """One due one-shot through the one claim path: claimed on its own row, then leased and run."""
    request = WakeRequest(agent_id=shot.agent_id, tier=Tier(shot.tier), trigger=Trigger.at, wake_id=shot.wake_id)
    try:
        async with daemon.turns:
            if daemon.stopping:
                return  # never claimed: the next start (or another replica) runs it
            log.info("oneshot.due", agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id), fire_at=shot.fire_at.isoformat())
            wait_s = 0.0 if request.tier in NO_WAIT_TIERS else daemon.config.daemon.busy_wait_s
            await daemon._leased(request, by=daemon.replica_id, wait_s=wait_s)
    finally:
        daemon.oneshots_running.discard(shot.wake_id)
