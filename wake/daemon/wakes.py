"""One daemon wake, scheduled, caught up, a one-shot or a `wake trigger` request, in the line of
`wake.run.claim`'s steps: the claim, the lease, the wake, with the daemon's own bookkeeping (the
wake in its heartbeat, its fire lag, the requester told it started) between the two, and the
slot PostgreSQL was away for kept in the spool."""

from __future__ import annotations

import asyncio
import datetime as dt

from ledgers.vocab import NO_WAIT_TIERS, Status, Tier, Trigger
from wake import clock, logs
from wake.context import WakeRequest
from wake.daemon import manual, schedule, spool
from wake.daemon.running import Host, Running, Timing
from wake.errors import LeaseLost
from wake.observe import metrics
from wake.run import claim, cycle, unrun

log = logs.get("wake.daemon")


async def run_slot(daemon: Host, live: Running, sched: schedule.Schedule, slot: dt.datetime, trigger: Trigger, *, jitter_s: float = 0.0) -> None:
    """Claim the slot, take the lease and run the wake (`wake.run.claim`). A scheduled slot
    comes already delayed by its jitter (`jitter_s`, waited by the trigger)."""
    timing = Timing(
        agent=sched.agent_id, tier=sched.tier, slot=slot, started=daemon.now(), due=slot + dt.timedelta(seconds=jitter_s), jitter_s=jitter_s,
    )
    if daemon.timings is not None:
        daemon.timings.append(timing)
    async with daemon.turns:
        if daemon.stopping:
            timing.outcome = "shutdown"
            return  # never claimed: another replica (or the next start's catch-up) may run it
        request = WakeRequest(agent_id=sched.agent_id, tier=Tier(sched.tier), trigger=trigger, scheduled_for=slot)
        wait_s = 0.0 if request.tier in NO_WAIT_TIERS else daemon.config.daemon.busy_wait_s
        try:
            outcome = await leased(daemon, live, request, by=daemon.replica_id, wait_s=wait_s, timing=timing)
        except spool.PG_SLOT_FAILURES as exc:  # PostgreSQL failing mid-claim, or a row that waited past
            # the command timeout on a suspended process's lock: the spool records it once
            daemon.spool.keep(request, spool.unreachable(exc, live.session.stores.pg_address))
            return
        except Exception as exc:  # anything else: the slot this replica fired still gets its one row (the claim decides)
            log.error("slot.failed", agent=sched.agent_id, tier=sched.tier, scheduled_for=slot.isoformat(),
                      error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
            daemon.spool.keep(request, logs.redact_text(f"{type(exc).__name__}: {exc}"))
            return
        if outcome is not None and not outcome.recorded and outcome.unreachable == "postgres":  # the one row PostgreSQL owes it
            daemon.spool.keep(request, outcome.error or "")


async def leased(
    daemon: Host, live: Running, request: WakeRequest, *, by: str | None, wait_s: float, timing: Timing | None = None, request_id: str | None = None,
) -> cycle.WakeOutcome | None:
    """Every daemon wake, scheduled or triggered, in the line of `wake.run.claim`'s steps: the
    claim (with `by`), the lease, the wake; registered as running while it runs (`request_id`:
    the `wake trigger` request told it started). None when it did not run."""
    session = live.session
    t = timing or Timing()
    task = asyncio.current_task()
    assert task is not None
    try:
        async with claim.started(
            session, request, claim.Claim(by=by) if by is not None else None, owner=daemon.owner, wait_s=wait_s, jitter_s=t.jitter_s,
            now=daemon.now,
        ) as wake:
            if wake is None:
                t.outcome = "not run"
                return None
            t.claim_ms, t.lease_ms = wake.claim_ms, wake.lease_ms
            if daemon.stopping:
                t.outcome = "shutdown"
                if by is not None:
                    await unrun.write(session, unrun.NotRun.of(request, Status.skipped, claim.SHUTTING_DOWN, at=daemon.now()))
                return None
            await _running(daemon, task, wake, t, request_id)
            t2 = clock.monotonic_ms()
            outcome = await claim.ran(session, wake, now=daemon.now)
            t.wake_ms, t.outcome = clock.monotonic_ms() - t2, outcome.status
            t3 = clock.monotonic_ms()
        t.release_ms = clock.monotonic_ms() - t3
        return outcome
    except LeaseLost:
        return None  # logged `wake.cancelled` (lease lost); the row says `aborted` if it still could
    finally:
        daemon.running.pop(task, None)


async def _running(daemon: Host, task: asyncio.Task[object], wake: claim.Started, t: Timing, request_id: str | None) -> None:
    """A wake about to run under its fence: in the heartbeat's list, its fire lag measured, its requester told."""
    fenced, held = wake.request, wake.held
    t.running_at = daemon.now()
    if fenced.trigger == Trigger.schedule and fenced.scheduled_for is not None:  # a catch-up slot is old on purpose
        metrics.observe_fire_lag(fenced.agent_id, fenced.tier, (t.running_at - fenced.scheduled_for).total_seconds() - t.jitter_s)
    daemon.running[task] = {
        "agent": fenced.agent_id, "tier": fenced.tier, "wake_id": str(fenced.wake_id), "trigger": fenced.trigger,
        "started_at": daemon.now().isoformat(), "fence": held.fence,
    }
    if daemon.notifier.enabled:
        daemon.notifier.status(daemon.status_text())
    if request_id is not None:
        await manual.report(daemon, request_id, {"event": "started", "wake_id": str(fenced.wake_id)})
