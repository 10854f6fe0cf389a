"""The daemon's APScheduler jobs: one per (agent, tier) of the agents this replica owns
(`wake.daemon.ownership`), added and dropped as the membership changes; each fire handed to a
tracked task (`_fire`); and the start's catch-up of the slots missed while no replica ran them."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import heapq
from collections.abc import Iterable, Sequence

from apscheduler.jobstores.base import JobLookupError

from ledgers import handover
from ledgers.vocab import Trigger
from wake import logs
from wake.daemon import ownership, schedule
from wake.daemon.running import Host
from wake.observe import metrics

log = logs.get("wake.daemon")

# How many agents' jobs a membership change adds between two turns of the event loop.
ADD_CHUNK = 500
JOB_DEFAULTS: dict[str, object] = {"coalesce": True, "misfire_grace_time": None, "max_instances": 1}
# How many of the next fires the heartbeat (and `wake status`) carries: building, sorting and
# encoding every job's on every beat blocked the loop for tens of milliseconds at 3,000 jobs.
NEXT_FIRES = 10


def schedule_all(daemon: Host) -> None:
    """Every configured schedule; a job for each of the agents this replica owns."""
    daemon.live.scheduler.remove_all_jobs()
    daemon.schedules = {(s.agent_id, s.tier): s for s in schedule.all_schedules(daemon.config)}
    daemon.triggers = {}
    add(daemon, (a for a in daemon.config.agents if daemon.owns(a)))
    log.info("daemon.scheduled", jobs=len(daemon.triggers), next=daemon.status_text())


def add(daemon: Host, agents: Iterable[str]) -> None:
    for agent_id in agents:
        _add_jobs(daemon, agent_id)


async def add_gradually(daemon: Host, agents: Sequence[str], *, since: dt.datetime) -> int:
    """The jobs of many agents gained at once, `ADD_CHUNK` at a time with the loop free between
    chunks, each job starting from `since` (the gain: a slot due while it waited still fires).
    An agent lost again meanwhile, or a replica stopping, adds nothing more. Returns the jobs added."""
    added = 0
    for n, agent_id in enumerate(agents, start=1):
        live = daemon.opened
        if daemon.stopping or live is None or not live.scheduler.running:
            break
        if daemon.owns(agent_id):
            added += _add_jobs(daemon, agent_id, since=since)
        if n % ADD_CHUNK == 0:
            await asyncio.sleep(0)
    return added


def _add_jobs(daemon: Host, agent_id: str, *, since: dt.datetime | None = None) -> int:
    scheduler, added = daemon.live.scheduler, 0
    for tier in daemon.config.agents[agent_id].tiers if agent_id in daemon.config.agents else ():
        sched = daemon.schedules.get((agent_id, tier))
        if sched is None or (agent_id, tier) in daemon.triggers:
            continue
        trigger = daemon.triggers[(agent_id, tier)] = schedule.SlotTrigger(sched, since=since)
        scheduler.add_job(functools.partial(fire, daemon), trigger=trigger, args=[agent_id, tier], id=f"{agent_id}/{tier}",
                          name=f"wake {agent_id}/{tier}")
        added += 1
    return added


def remove(daemon: Host, agents: Iterable[str]) -> None:
    gone = set(agents)
    for key in [k for k in daemon.triggers if k[0] in gone]:
        del daemon.triggers[key]
        daemon.handed.pop(key, None)  # a later takeover catches up the gap, not the coalescing check
        with contextlib.suppress(JobLookupError):
            daemon.live.scheduler.remove_job(f"{key[0]}/{key[1]}")


def apply(daemon: Host, change: ownership.Change) -> None:
    """A membership change: log the handovers, drop the jobs of agents lost, add those gained,
    and catch up what the agents gained missed (the start's catch-up for a first share)."""
    change.log()
    live = daemon.opened
    if live is not None and live.scheduler.running:
        remove(daemon, change.lost_agents())  # at once: a lost agent must not fire here again
        gained = change.gained_agents()
        if len(gained) <= ADD_CHUNK:
            add(daemon, gained)
        else:  # a job costs APScheduler 100-170 us: 20,000 at once held the loop, heartbeats included, for seconds
            daemon._spawn(add_gradually(daemon, gained, since=daemon.now()), name=f"add-jobs:{len(gained)}")
    if daemon.stopping:
        return
    first = {a for h in change.gained if h.why == "start" for a in h.agents}
    if first:
        catch_up(daemon, first)
    taken = {a: h for h in change.gained if h.why != "start" for a in h.agents}
    if taken and live is not None:
        scheds = [s for s in daemon.schedules.values() if s.agent_id in taken]
        own = daemon.ownership
        daemon._spawn(ownership.take_over(
            live.session, scheds, taken, by=daemon.replica_id, now=daemon.now, spawn=lambda coro, name: daemon._spawn(coro, name=name),
            spool=daemon.spool.keep, look_back_s=ownership.LOOK_BACK_TTLS * own.ttl_s, members=own.members, stop=daemon.stop,
            run_slot=lambda sched, slot, delay: daemon.run_slot(sched, slot, Trigger.schedule, jitter_s=delay),
        ), name=f"take-over:{len(taken)}")


def next_fires(daemon: Host, n: int = NEXT_FIRES) -> list[dict[str, object]]:
    """The next `n` fires, soonest first."""
    live = daemon.opened
    if live is None or not live.scheduler.running:
        return []
    jobs = heapq.nsmallest(n, (j for j in live.scheduler.get_jobs() if j.next_run_time), key=lambda j: j.next_run_time)
    return [{"agent": j.args[0], "tier": j.args[1], "at": j.next_run_time.astimezone(dt.UTC).isoformat()} for j in jobs]


async def fire(daemon: Host, agent_id: str, tier: str) -> None:
    """The APScheduler job: its trigger fired at the slot plus its jitter and names the slot;
    hand it to a task."""
    sched, trigger = daemon.schedules.get((agent_id, tier)), daemon.triggers.get((agent_id, tier))
    if sched is None or trigger is None or daemon.stopping:
        return
    if daemon.shared and not daemon.ownership.fresh():
        trigger.take()
        return  # its heartbeat is stale: another replica may own the agent now (the next beat decides)
    fired = trigger.take()
    if fired is None:
        return
    slot, delay = fired
    daemon._spawn(daemon.run_slot(sched, slot, Trigger.schedule, jitter_s=delay), name=f"slot:{agent_id}/{tier}:{slot.isoformat()}")
    previous, daemon.handed[(agent_id, tier)] = daemon.handed.get((agent_id, tier)), slot
    live = daemon.opened
    if daemon.shared and previous is not None and live is not None:
        # slots coalesced away while the loop was late: no other replica schedules them, so they are recorded here
        skipped = list(schedule.fires_between(sched, previous, slot - dt.timedelta(microseconds=1)))[-ownership.MAX_MISSED_PER_TIER:]
        for lost in skipped:
            daemon._spawn(ownership.record_missed(live.session, sched, lost, f"coalesced: the event loop was late for it; run by {daemon.replica_id} "
                                                  f"instead: {slot.isoformat()}", by=daemon.replica_id, now=daemon.now()),
                          name=f"coalesced:{agent_id}/{tier}:{lost.isoformat()}")


def catch_up(daemon: Host, agents: set[str] | None = None) -> None:
    """At start, one wake for the newest missed slot of every tier whose policy says `one`
    (of `agents`: this replica's first share)."""
    daemon._spawn(catch_up_all(daemon, agents), name="catch-up")


async def catch_up_all(daemon: Host, agents: set[str] | None = None) -> None:
    now = daemon.now()
    scheds = [s for s in daemon.schedules.values() if agents is None or s.agent_id in agents]
    async with daemon.live.session.stores.pg_conn() as conn:  # one round trip, not one per tier (20,000 at 20,000 agents)
        lasts = await handover.last_claimed(conn, sorted({s.agent_id for s in scheds}))
    for sched in scheds:
        last = lasts.get((sched.agent_id, sched.tier))
        missed = schedule.last_missed(sched, last, now)
        if missed is None:
            continue
        if sched.catch_up != "one" and daemon.config.tier(sched.agent_id, sched.tier).misfire_grace_s is not None:
            # With a grace window the slot missed while down is a late scheduled slot: it runs
            # if still within grace, else it is recorded `missed` (docs/daemon.md).
            daemon._spawn(daemon.run_slot(sched, missed, Trigger.schedule), name=f"late:{sched.agent_id}/{sched.tier}")
            continue
        if sched.catch_up != "one":
            metrics.observe_skipped(sched.agent_id, sched.tier, "catch_up_skipped")
            log.info(
                "wake.catch_up_skipped", agent=sched.agent_id, tier=sched.tier, missed=missed.isoformat(), last=last.isoformat() if last else None
            )
            continue
        log.info("wake.catch_up", agent=sched.agent_id, tier=sched.tier, slot=missed.isoformat(), last=last.isoformat() if last else None)
        daemon._spawn(daemon.run_slot(sched, missed, Trigger.catch_up), name=f"catch-up:{sched.agent_id}/{sched.tier}")
