"""`wake trigger` requests: taken from Redis onto this replica's list, run through the one claim
path (no slot claim: a manual wake claims nothing but its lease), and the requester told what
happened (`wake.daemon.control`). The daemon (`Host`) supplies the config, stores and the wake."""

from __future__ import annotations

import asyncio
from typing import Any

from ledgers.vocab import Tier, Trigger
from wake import logs
from wake.context import WakeRequest
from wake.daemon import control
from wake.daemon.running import Host
from wake.errors import AgentBusy
from wake.run import claim

log = logs.get("wake.daemon")

# The trigger consumer's blocking pop; short so a shutdown is not held up by it.
TRIGGER_POP_S = 1.0


async def loop(daemon: Host) -> None:
    """Take `wake trigger` requests onto this replica's taken list (`control.next_request`),
    beating first: a replica holding taken requests and no heartbeat is a dead one
    (`wake.daemon.dead_claimers`)."""
    beaten = False
    while not daemon.stopping:
        try:
            if not beaten:
                await control.heartbeat(daemon.live.session.stores.redis, daemon.state(), ttl_s=daemon.heartbeat_ttl_s)
                beaten = True
            request = await control.next_request(daemon.live.session.stores.redis, TRIGGER_POP_S, taken_by=daemon.replica_id)
        except Exception as exc:  # Redis away: keep trying, the heartbeat says it too
            log.warning("daemon.trigger_poll_failed", error=logs.redact_text(str(exc)))
            await asyncio.sleep(TRIGGER_POP_S)
            continue
        if request is not None:
            if daemon.stopping:
                await report(daemon, request.request_id, {"event": "refused", "reason": "the daemon is shutting down"})
                await _done(daemon, request)
                return
            daemon._spawn(_seen_through(daemon, request), name=f"manual:{request.agent}/{request.tier}")


async def _seen_through(daemon: Host, request: control.TriggerRequest) -> None:
    try:
        await run(daemon, request)
    finally:
        await asyncio.shield(_done(daemon, request))


async def _done(daemon: Host, request: control.TriggerRequest) -> None:
    """The request off this replica's taken list; Redis away: it stays, and this replica's
    heartbeat keeps others from closing it."""
    try:
        await control.done(daemon.live.session.stores.redis, daemon.replica_id, request)
    except Exception as exc:  # noqa: BLE001 - logged; the request stays taken by a live replica
        log.warning("daemon.trigger_done_failed", request_id=request.request_id, error=logs.redact_text(str(exc)))


async def report(daemon: Host, request_id: str, event: dict[str, Any]) -> None:
    try:
        await control.report(daemon.live.session.stores.redis, request_id, event)
    except Exception as exc:  # the operator's wait times out; the ledger still has the wake
        log.warning("daemon.report_failed", request_id=request_id, report=event.get("event"), error=logs.redact_text(str(exc)))


async def run(daemon: Host, request: control.TriggerRequest) -> None:
    """A `wake trigger` request: refused when the agent or tier is unknown or the agent busy."""
    log.info("trigger.received", request_id=request.request_id, agent=request.agent, tier=request.tier)
    agent = daemon.config.agents.get(request.agent)
    if agent is None or request.tier not in agent.tiers:
        known = ", ".join(f"{a}/{t}" for a, conf in daemon.config.agents.items() for t in conf.tiers)
        what = f"agent {request.agent!r}" if agent is None else f"tier {request.tier!r} of agent {request.agent!r}"
        await report(daemon, request.request_id, {"event": "refused", "reason": f"unknown {what}; configured: {known}"})
        return
    wake = WakeRequest(agent_id=request.agent, tier=Tier(request.tier), trigger=Trigger.manual, wake_id=request.wake_id)

    settled = {"event": "settled", "wake_id": str(wake.wake_id)}
    async with daemon.turns:
        try:
            outcome = await daemon._leased(wake, by=None, wait_s=0.0, request_id=request.request_id)
        except AgentBusy as busy:
            await report(daemon, request.request_id, {"event": "refused", "reason": str(busy).removesuffix(claim.BUSY_HINT)})
            return
        except asyncio.CancelledError as exc:  # the canceller's reason, as the row has it (the drain timeout names itself)
            why = str(exc.args[0]) if exc.args and exc.args[0] else "cancelled"
            await asyncio.shield(report(daemon, request.request_id, {**settled, "status": "aborted", "note": None, "error": why}))
            raise
    if outcome is None:
        await report(daemon, request.request_id, {**settled, "status": "aborted", "note": None, "error": "lease lost"})
        return
    await report(daemon, request.request_id, {**settled, "status": outcome.status, "note": outcome.note, "error": outcome.error})
