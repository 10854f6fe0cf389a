"""`wake daemon`: the process around the wake cycle (docs/design.md, steps 1-3 and the life around them).

The main loop is a stop event plus named side tasks (watchdog, heartbeat, trigger consumer, the
outbox sender, the one-shot poller, and with `[inbox] listen` the inbox endpoint).
APScheduler's AsyncIOScheduler runs in the same event loop with one job per (agent, tier) of the
agents this replica owns (`wake.daemon.ownership`); a job only names its slot and hands it to a
tracked task, so every wake in flight is one task the daemon can drain or cancel.

One scheduled slot, in order: its trigger fires at the slot plus its jitter (the same on every
replica) and hands the job the slot → claim it in
`wake_slots` (the loser logs `wake.skipped reason=slot_taken` and stops) → take the agent's lease
and fence (busy: whisper gives up at once, surface and full wait `busy_wait_s`, then the slot is
recorded `skipped`, reason `busy`) → run the wake under the fence; losing the lease cancels it.

Job defaults, on purpose:

- `coalesce=True`: after a blocked loop or a suspended process several slots may be due at
  once; run only the newest. Older slots are the missed-run policy's business, not a burst (the
  owner records each `missed`, in `_fire`).
- `misfire_grace_time=None`: a late slot still runs, however late (the claim makes a late run
  safe: a slot some other replica ran is refused). Dropping it would be a silent gap.
- `max_instances=1`: the job body returns as soon as it has handed the slot to a task, so one
  instance never blocks the next slot; overlap between wakes of an agent is the lease's job,
  which (unlike APScheduler) sees every replica.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime as dt
import gc
import heapq
import os
import signal
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import asyncpg
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from ledgers import controls, dead_processes, introspection, slots
from ledgers.vocab import NO_WAIT_TIERS, Tier, Trigger
from wake import __version__, clock, logs, stores
from wake.arrival import code_check
from wake.config import Config, load_config_file
from wake.context import WakeRequest
from wake.daemon import channels, control, inbox, notify, orphans, outbox, ownership, schedule
from wake.errors import AgentBusy, LeaseBusy, LeaseLost, StoreUnavailable, WakeError
from wake.observe import metrics
from wake.run import claim, cycle, session
from wake.run.claim import BUSY_HINT
from wake.stores import engines, lease

log = logs.get("wake.daemon")

JOB_DEFAULTS: dict[str, Any] = {"coalesce": True, "misfire_grace_time": None, "max_instances": 1}
# How many of the next fires the heartbeat (and `wake status`) carries: building, sorting and
# encoding every job's on every beat blocked the loop for tens of milliseconds at 3,000 jobs.
NEXT_FIRES = 10
# The trigger consumer's blocking pop; short so a shutdown is not held up by it.
TRIGGER_POP_S = 1.0
# A cancelled wake gets this long to settle `aborted` before the daemon stops waiting for it.
CANCEL_GRACE_S = 10.0
SIDE_CANCEL_TRIES = 3


async def _cancelled(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel the side tasks and wait for them, boundedly: a cancellation can be lost (an
    `asyncio.wait_for` that finished just as it came, before Python 3.12), and a loop that lost it
    would keep the daemon from ever stopping. Ask again; name what still runs, and go on."""
    stuck = {t for t in tasks if not t.done()}
    for _ in range(SIDE_CANCEL_TRIES):
        if not stuck:
            return
        for task in stuck:
            task.cancel()
        _, stuck = await asyncio.wait(stuck, timeout=CANCEL_GRACE_S / SIDE_CANCEL_TRIES)
    if stuck:
        log.error("daemon.side_tasks_stuck", tasks=sorted(t.get_name() for t in stuck))
# Slots that got no row while PostgreSQL was away, kept in memory until it answers (oldest
# dropped, and logged, past this many); and how often an unreachable PostgreSQL is asked again.
SPOOL_MAX = 1000
# PostgreSQL failing under a slot, however asyncpg says it: the slot is spooled, and recorded once it answers.
PG_SLOT_FAILURES: tuple[type[BaseException], ...] = (*stores.PG_OUTAGE, asyncpg.PostgresError)
SPOOL_RETRY_S = 1.0


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


@dataclass(kw_only=True)
class Timing(claim.Timing):
    """Per-slot timings the benchmark reads (bench/scheduler.py): the claim path's, and the jitter."""

    agent: str
    tier: str
    slot: dt.datetime
    started: dt.datetime  # when the job handed the slot over
    due: dt.datetime | None = None  # when it was due to be handed over: the slot plus its jitter


class Companion(Protocol):
    """A side task that a layer above runs inside the daemon (the console, `[console] listen`):
    started with the other side tasks once the stores are open, it returns once `daemon.stop` is set."""

    name: str

    async def __call__(self, daemon: Daemon) -> None: ...


@dataclass(kw_only=True)
class Daemon:
    config: Config
    notifier: notify.Notifier = field(default_factory=notify.Notifier.from_env)
    now: Callable[[], dt.datetime] = clock.now
    timings: list[Timing] | None = None
    # Off in tests that run several daemons in one process.
    handle_signals: bool = True
    companions: Sequence[Companion] = ()

    replica_id: str = field(default_factory=control.new_replica_id)
    owner: str = field(default_factory=claim.owner)
    started_at: dt.datetime = field(default_factory=clock.now)

    def __post_init__(self) -> None:
        self.stop = asyncio.Event()
        self.stopping = False
        self.tasks: set[asyncio.Task[Any]] = set()
        self.running: dict[asyncio.Task[Any], dict[str, Any]] = {}
        self.schedules: dict[tuple[str, str], schedule.Schedule] = {}
        self.triggers: dict[tuple[str, str], schedule.SlotTrigger] = {}
        self.handed: dict[tuple[str, str], dt.datetime] = {}  # the slot each job handed over last
        self.session: session.Session | None = None
        self.scheduler: AsyncIOScheduler | None = None
        self.turns = asyncio.Semaphore(self.config.daemon.max_concurrent_wakes)
        self.metrics: metrics.Metrics | None = None
        self.sender: outbox.Sender | None = None
        self.oneshots_running: set[Any] = set()  # one-shot wake ids handed to a task here
        self.spool: collections.deque[claim.Missed] = collections.deque()
        self.spooled = asyncio.Event()
        self.stop_signal: str | None = None
        self.shared = self.config.daemon.ownership == "rendezvous"
        self.ownership = ownership.Ownership(replica_id=self.replica_id, ttl_s=ownership.TTL_BEATS * self.config.daemon.heartbeat_s)

    @property
    def stores(self) -> stores.Stores | None:
        """The session's stores (None before `run` opened them)."""
        return self.session.stores if self.session is not None else None

    @stores.setter
    def stores(self, st: stores.Stores) -> None:
        assert self.session is not None, "the daemon's stores come with its session"
        self.session = dataclasses.replace(self.session, stores=st)

    # -- the life of the process ------------------------------------------------------------------

    async def run(self) -> int:
        """Run until SIGTERM/SIGINT, then drain; returns the exit status (0 after a clean drain)."""
        async with session.open_session(self.config, keep_alive=True) as s:
            self.session = s
            st = s.stores
            channels.check_routes(self.config)  # every Apprise route's credentials, before anything is scheduled
            await self._close_abandoned_at_start()
            self._warm_workspaces()
            if self.handle_signals:
                self._install_signals()
            self.scheduler = AsyncIOScheduler(timezone=dt.UTC, job_defaults=JOB_DEFAULTS)
            self.scheduler.start()
            self._schedule_all()
            if self.shared:
                await self._beat()  # the first membership read gives this replica its share, and its catch-up
            else:
                self._catch_up()
            self.sender = outbox.Sender(lambda: self.config, st, owner=self.owner, now=self.now)
            endpoint = inbox.Endpoint.open(lambda: self.config, st, now=self.now) if self.config.inbox.listen else None
            exposition = self._serve_metrics()
            self.notifier.ready(self.status_text())  # stores reachable, schema checked, jobs scheduled
            settle_heap()
            side = [
                asyncio.create_task(notify.watchdog_loop(self.notifier), name="watchdog"),
                asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
                asyncio.create_task(self._trigger_loop(), name="triggers"),
                *self._operator_tasks(),
                asyncio.create_task(self.spool_loop(), name="spool"),
                *(asyncio.create_task(c(self), name=c.name) for c in self.companions),
                *([asyncio.create_task(endpoint.serve(self.stop), name="inbox")] if endpoint is not None else []),
            ]
            if self.metrics is not None:
                side.append(asyncio.create_task(metrics.measure_loop_lag(self.metrics), name="loop-lag"))
            if st.embedded:
                side.append(asyncio.create_task(self._engine_loop(st.embedded), name="engines"))
            log.info("daemon.ready", replica=self.replica_id, jobs=len(self.triggers), embedded=list(st.embedded), status=self.status_text())
            failed = asyncio.create_task(self._first_failure(side), name="side-task-watch")
            await self.stop.wait()
            failed.cancel()
            await self._shutdown(side)
            if exposition is not None:
                exposition.close()
                metrics.install(None)
            if self.handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    asyncio.get_running_loop().remove_signal_handler(sig)
        log.info("daemon.stopped", replica=self.replica_id)
        return 0

    def _warm_workspaces(self) -> None:
        """Start building each agent's workspace fingerprint now (in the background), so that the
        first wake's facts check finds it ready instead of spending its budget on the build."""
        for agent_id in self.config.agents:
            ws = code_check.workspace_of(self.config, agent_id)
            if ws is not None:
                ws.warm()
                log.info("workspace.warming", agent=agent_id, root=str(ws.root))

    def _serve_metrics(self) -> metrics.Exposition | None:
        """`[metrics] listen`: the Prometheus endpoint, served from this process (docs/metrics.md)."""
        listen = self.config.metrics.listen
        if listen is None:
            return None
        self.metrics = metrics.Metrics(agents=agent_infos(self.config), version=__version__)
        self.metrics.set_running(lambda: list(self.running.values()))
        self.metrics.set_owned(lambda: float(self.owned_count()))
        sender = self.sender
        if sender is not None:
            self.metrics.set_outbox_backlog(lambda: sender.backlog)
        exposition = metrics.serve(listen, self.metrics)
        metrics.install(self.metrics)
        log.info("daemon.metrics", url=f"http://{listen}/metrics")
        return exposition

    def request_stop(self, signum: int | None = None) -> None:
        if not self.stop.is_set():
            self.stop_signal = signal.Signals(signum).name if signum else None
            log.info("daemon.stopping", signal=signal.Signals(signum).name if signum else None, running=len(self.running))
            self.stop.set()

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, sig)
        loop.add_signal_handler(signal.SIGHUP, lambda: self._spawn(self.reload(), name="reload"))

    async def _first_failure(self, side: list[asyncio.Task[Any]]) -> None:
        """A side task that dies takes the daemon down (systemd restarts it), logged. One that
        just ends (the watchdog loop without a watchdog) is fine."""
        waiting = set(side)
        while waiting:
            done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None and not self.stopping:
                    log.error("daemon.side_task_failed", task=task.get_name(), error=repr(task.exception()))
                    self.request_stop()
                    return

    async def _shutdown(self, side: list[asyncio.Task[Any]]) -> None:
        """Stop firing, say STOPPING=1, drain within `drain_s`, cancel what remains, release."""
        self.stopping = True
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        drain_s = self.config.daemon.drain_s
        self.notifier.stopping(f"draining {len(self.running)} wake(s), up to {drain_s:g}s")
        if self.shared:
            await self._leave()
        pending = {t for t in self.tasks if not t.done()}
        if pending:
            log.info("daemon.draining", wakes=len(self.running), tasks=len(pending), drain_s=drain_s)
            _, pending = await asyncio.wait(pending, timeout=drain_s)
        if pending:
            log.warning("daemon.drain_timeout", cancelled=len(pending))
            reason = f"drain timeout on {self.stop_signal or 'stop'} after {drain_s:g} s"  # the aborted rows' error
            for task in pending:
                task.cancel(reason)
            await asyncio.wait(pending, timeout=CANCEL_GRACE_S)
        if self.spool:
            log.error("daemon.spool_lost", slots=len(self.spool), first=self.spool[0].request.scheduled_for.isoformat()
                      if self.spool[0].request.scheduled_for else None)
        await _cancelled(side)
        assert self.stores is not None
        with contextlib.suppress(Exception):
            await control.forget(self.stores.redis, self.replica_id)

    # -- schedules --------------------------------------------------------------------------------

    def _schedule_all(self) -> None:
        """Every configured schedule; a job for each of the agents this replica owns."""
        assert self.scheduler is not None
        self.scheduler.remove_all_jobs()
        self.schedules = {(s.agent_id, s.tier): s for s in schedule.all_schedules(self.config)}
        self.triggers = {}
        self._add_jobs(a for a in self.config.agents if self.owns(a))
        log.info("daemon.scheduled", jobs=len(self.triggers), next=self.status_text())

    def owns(self, agent_id: str) -> bool:
        return not self.shared or agent_id in self.ownership.owned

    def owned_count(self) -> int:
        return len(self.ownership.owned) if self.shared else len(self.config.agents)

    def _add_jobs(self, agents: Iterable[str]) -> None:
        assert self.scheduler is not None
        for agent_id in agents:
            for tier in self.config.agents[agent_id].tiers if agent_id in self.config.agents else ():
                sched = self.schedules.get((agent_id, tier))
                if sched is None or (agent_id, tier) in self.triggers:
                    continue
                trigger = self.triggers[(agent_id, tier)] = schedule.SlotTrigger(sched)
                self.scheduler.add_job(self._fire, trigger=trigger, args=[agent_id, tier], id=f"{agent_id}/{tier}", name=f"wake {agent_id}/{tier}")

    def _remove_jobs(self, agents: Iterable[str]) -> None:
        assert self.scheduler is not None
        gone = set(agents)
        for key in [k for k in self.triggers if k[0] in gone]:
            del self.triggers[key]
            self.handed.pop(key, None)  # a later takeover catches up the gap, not the coalescing check
            with contextlib.suppress(JobLookupError):
                self.scheduler.remove_job(f"{key[0]}/{key[1]}")

    def _apply(self, change: ownership.Change) -> None:
        """A membership change: log the handovers, drop the jobs of agents lost, add those gained,
        and catch up what the agents gained missed (the start's catch-up for a first share)."""
        change.log()
        if self.scheduler is not None and self.scheduler.running:
            self._remove_jobs(change.lost_agents())
            self._add_jobs(change.gained_agents())
        if self.stopping:
            return
        first = {a for h in change.gained if h.why == "start" for a in h.agents}
        if first:
            self._catch_up(first)
        taken = {a: h for h in change.gained if h.why != "start" for a in h.agents}
        if taken and self.session is not None:
            scheds = [s for s in self.schedules.values() if s.agent_id in taken]
            self._spawn(ownership.take_over(
                self.session, scheds, taken, by=self.replica_id, now=self.now, spawn=lambda coro, name: self._spawn(coro, name=name),
                spool=self.keep_missed, look_back_s=ownership.LOOK_BACK_TTLS * self.ownership.ttl_s, members=self.ownership.members,
                run_slot=lambda sched, slot, delay: self.run_slot(sched, slot, Trigger.schedule, jitter_s=delay),
            ), name=f"take-over:{len(taken)}")

    def next_fires(self, n: int = NEXT_FIRES) -> list[dict[str, Any]]:
        """The next `n` fires, soonest first."""
        if self.scheduler is None:
            return []
        jobs = heapq.nsmallest(n, (j for j in self.scheduler.get_jobs() if j.next_run_time), key=lambda j: j.next_run_time)
        return [{"agent": j.args[0], "tier": j.args[1], "at": j.next_run_time.astimezone(dt.UTC).isoformat()} for j in jobs]

    def status_text(self) -> str:
        fires = self.next_fires(1)
        head = f"next wake {fires[0]['agent']}/{fires[0]['tier']} at {fires[0]['at']}" if fires else "no wake scheduled"
        return f"{head}; {len(self.running)} running"

    async def _fire(self, agent_id: str, tier: str) -> None:
        """The APScheduler job: its trigger fired at the slot plus its jitter and names the slot;
        hand it to a task."""
        sched, trigger = self.schedules.get((agent_id, tier)), self.triggers.get((agent_id, tier))
        if sched is None or trigger is None or self.stopping:
            return
        if self.shared and not self.ownership.fresh():
            trigger.take()
            return  # its heartbeat is stale: another replica may own the agent now (the next beat decides)
        fired = trigger.take()
        if fired is None:
            return
        slot, delay = fired
        self._spawn(self.run_slot(sched, slot, Trigger.schedule, jitter_s=delay), name=f"slot:{agent_id}/{tier}:{slot.isoformat()}")
        previous, self.handed[(agent_id, tier)] = self.handed.get((agent_id, tier)), slot
        if self.shared and previous is not None and self.session is not None:
            # slots coalesced away while the loop was late: no other replica schedules them, so they are recorded here
            skipped = list(schedule.fires_between(sched, previous, slot - dt.timedelta(microseconds=1)))[-ownership.MAX_MISSED_PER_TIER:]
            for lost in skipped:
                self._spawn(ownership.record_missed(self.session, sched, lost, f"coalesced: the event loop was late for it; run by {self.replica_id} "
                                                    f"instead: {slot.isoformat()}", by=self.replica_id, now=self.now()),
                            name=f"coalesced:{agent_id}/{tier}:{lost.isoformat()}")

    def _catch_up(self, agents: set[str] | None = None) -> None:
        """At start, one wake for the newest missed slot of every tier whose policy says `one`
        (of `agents`: this replica's first share)."""
        self._spawn(self._catch_up_all(agents), name="catch-up")

    async def _catch_up_all(self, agents: set[str] | None = None) -> None:
        assert self.stores is not None
        now = self.now()
        scheds = [s for s in self.schedules.values() if agents is None or s.agent_id in agents]
        async with self.stores.pg_conn() as conn:
            lasts = [await slots.last_claimed(conn, s.agent_id, s.tier) for s in scheds]
        for sched, last in zip(scheds, lasts, strict=True):
            missed = schedule.last_missed(sched, last, now)
            if missed is None:
                continue
            if sched.catch_up != "one" and self.config.tier(sched.agent_id, sched.tier).misfire_grace_s is not None:
                # With a grace window the slot missed while down is a late scheduled slot: it runs
                # if still within grace, else it is recorded `missed` (docs/daemon.md).
                self._spawn(self.run_slot(sched, missed, Trigger.schedule), name=f"late:{sched.agent_id}/{sched.tier}")
                continue
            if sched.catch_up != "one":
                metrics.observe_skipped(sched.agent_id, sched.tier, "catch_up_skipped")
                log.info(
                    "wake.catch_up_skipped", agent=sched.agent_id, tier=sched.tier, missed=missed.isoformat(), last=last.isoformat() if last else None
                )
                continue
            log.info("wake.catch_up", agent=sched.agent_id, tier=sched.tier, slot=missed.isoformat(), last=last.isoformat() if last else None)
            self._spawn(self.run_slot(sched, missed, Trigger.catch_up), name=f"catch-up:{sched.agent_id}/{sched.tier}")

    async def _engine_loop(self, embedded: tuple[str, ...]) -> None:
        """Supervise the embedded engines: every ENGINE_CHECK_S, one that is not running is started
        again (`engine.restarted`, `wake_engine_restarts_total`); the slots that fired while it was
        away have their rows (`failed`: the lease could not be taken; `missed`: PostgreSQL was
        away), and the clients reconnect on their next call."""
        state_dir = self.config.state_dir_path()
        start = {"postgres": engines.start_postgres, "redis": engines.start_redis}
        while True:
            await asyncio.sleep(ENGINE_CHECK_S)
            running = await asyncio.to_thread(engines.engine_pids, state_dir)
            for name in embedded:
                if name in running:
                    continue
                try:
                    await asyncio.to_thread(start[name], state_dir, idle_s=self.config.engines.idle_s)
                except Exception as exc:  # noqa: BLE001 - tried again on the next round; never the daemon's end
                    log.error("engine.restart_failed", engine=name, error=f"{type(exc).__name__}: {exc}")

    async def _close_abandoned_at_start(self) -> None:
        """Rows left `started` by a process that is dead on this host are closed at once
        (`ledgers.dead_processes`); the others once their lease has expired: take each such agent's
        lease (if free) and close them under the new fence."""
        assert self.stores is not None
        host = socket.gethostname()
        async with self.stores.pg_conn() as conn:
            for agent_id, pids in (await dead_processes.dead_on_host(conn, host, engines.alive)).items():
                for row in await dead_processes.abandon_dead(conn, agent_id, host, pids, DEAD_ON_HOST):
                    metrics.observe_abandoned(agent_id, row["tier"])
                    log.warning("wake.abandoned", agent=agent_id, wake_id=str(row["wake_id"]), host=host, pid=row["pid"], fence=row["fence"],
                                closed_by="start-up: its process is dead on this host")
            agents = await introspection.agents_with_started(conn)
        assert self.session is not None
        await claim.record_dead_claims(self.session, host=host, alive=engines.alive, now=self.now())
        await self.close_unrecorded()
        for agent_id in agents:
            with contextlib.suppress(LeaseBusy):
                async with claim.agent_lease(self.config, self.stores, agent_id, owner=self.owner):
                    pass

    # -- one wake ---------------------------------------------------------------------------------

    def _spawn(self, coro: Any, *, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(self._logged(coro), name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _logged(self, coro: Any) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a store outage must not kill the daemon; the next slot retries
            log.error(
                "daemon.task_failed",
                task=current.get_name() if (current := asyncio.current_task()) else None,
                error=logs.redact_text(f"{type(exc).__name__}: {exc}"),
            )

    async def run_slot(self, sched: schedule.Schedule, slot: dt.datetime, trigger: Trigger, *, jitter_s: float = 0.0) -> None:
        """Claim the slot, take the lease and run the wake (`wake.run.claim`). A scheduled slot
        comes already delayed by its jitter (`jitter_s`, waited by the trigger)."""
        assert self.session is not None
        timing = Timing(
            agent=sched.agent_id, tier=sched.tier, slot=slot, started=self.now(), due=slot + dt.timedelta(seconds=jitter_s), jitter_s=jitter_s,
        )
        if self.timings is not None:
            self.timings.append(timing)
        async with self.turns:
            if self.stopping:
                timing.outcome = "shutdown"
                return  # never claimed: another replica (or the next start's catch-up) may run it
            request = WakeRequest(agent_id=sched.agent_id, tier=Tier(sched.tier), trigger=trigger, scheduled_for=slot)
            wait_s = 0.0 if request.tier in NO_WAIT_TIERS else self.config.daemon.busy_wait_s
            try:
                outcome = await self._leased(request, slot_claim=claim.Claim(by=self.replica_id), wait_s=wait_s, timing=timing)
            except PG_SLOT_FAILURES as exc:  # PostgreSQL failing mid-claim, or a row that waited past
                # the command timeout on a suspended process's lock: the spool records it once
                self.keep_missed(request, self._unreachable(exc))
                return
            except Exception as exc:  # anything else: the slot this replica fired still gets its one row (the claim decides)
                log.error("slot.failed", agent=sched.agent_id, tier=sched.tier, scheduled_for=slot.isoformat(),
                          error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
                self.keep_missed(request, logs.redact_text(f"{type(exc).__name__}: {exc}"))
                return
            if outcome is not None and not outcome.recorded and outcome.unreachable == "postgres":
                self.keep_missed(request, outcome.error or "")
            elif (outcome is None and not timing.outcome) or (outcome is not None and not outcome.recorded and outcome.unreachable is None):
                try:  # lost its lease before its row: the slot's row says so
                    await claim.record_lost(self.session, request, now=self.now())
                except PG_SLOT_FAILURES as exc:
                    self.keep_missed(request, self._unreachable(exc))

    # -- slots PostgreSQL was away for --------------------------------------------------------------

    def _unreachable(self, exc: BaseException) -> str:
        """What PostgreSQL failing under a slot is called in its spooled entry and its row, whatever
        asyncpg raised: `postgres unreachable at <address>: <why>`."""
        if isinstance(exc, StoreUnavailable) and exc.store == "postgres":
            return str(exc)
        address = self.stores.pg_address if self.stores is not None else "postgres"
        return str(StoreUnavailable("postgres", address, f"{type(exc).__name__}: {exc}"))

    def keep_missed(self, request: WakeRequest, error: str) -> None:
        """Keep a slot that got no row because PostgreSQL was unreachable, for `spool_loop`."""
        if len(self.spool) >= SPOOL_MAX:
            dropped = self.spool.popleft()
            log.error("daemon.spool_full", agent=dropped.request.agent_id, tier=dropped.request.tier,
                      scheduled_for=dropped.request.scheduled_for.isoformat() if dropped.request.scheduled_for else None, kept=SPOOL_MAX)
        now = self.now()
        since = self.spool[0].outage_since if self.spool else now  # the spool empties when PostgreSQL answers
        self.spool.append(claim.Missed(request=request, failed_at=now, error=logs.redact_text(error), outage_since=since))
        log.warning("slot.spooled", agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id),
                    scheduled_for=request.scheduled_for.isoformat() if request.scheduled_for else None, error=logs.redact_text(error),
                    spooled=len(self.spool))
        self.spooled.set()

    async def flush_spool(self) -> int:
        """Record every kept slot `missed` (the slot claim decides, across replicas); stops at the
        first that PostgreSQL still refuses. Returns how many are left."""
        assert self.session is not None
        while self.spool:
            missed = self.spool[0]
            try:
                await claim.record_missed(self.session, missed, by=self.replica_id, now=self.now())
            except stores.PG_OUTAGE:  # PostgreSQL still away, or failing under the write: kept, tried again
                return len(self.spool)
            except Exception as exc:  # a row that cannot be written for another reason is logged, not retried forever
                log.error("daemon.spool_failed", wake_id=str(missed.request.wake_id), error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
            with contextlib.suppress(ValueError):
                self.spool.remove(missed)
        self.spooled.clear()
        return 0

    async def spool_loop(self) -> None:
        """The side task: when slots are kept, ask PostgreSQL every `SPOOL_RETRY_S` until it answers."""
        while True:
            await self.spooled.wait()
            if await self.flush_spool():
                await asyncio.sleep(SPOOL_RETRY_S)

    async def _leased(
        self, request: WakeRequest, *, slot_claim: claim.Claim | None, wait_s: float, timing: claim.Timing | None = None,
        on_running: claim.OnRunning | None = None,
    ) -> cycle.WakeOutcome | None:
        """Every daemon wake, scheduled or triggered, runs through the one claim path."""
        assert self.session is not None

        async def running(fenced: WakeRequest, held: lease.Lease) -> None:
            task = asyncio.current_task()
            assert task is not None
            self.running[task] = {
                "agent": fenced.agent_id, "tier": fenced.tier, "wake_id": str(fenced.wake_id), "trigger": fenced.trigger,
                "started_at": self.now().isoformat(), "fence": held.fence,
            }
            if self.notifier.enabled:
                self.notifier.status(self.status_text())
            if on_running is not None:
                await on_running(fenced, held)

        try:
            return await claim.run(
                self.session, request, owner=self.owner, claim=slot_claim, wait_s=wait_s, now=self.now, stopping=lambda: self.stopping,
                on_running=running, timing=timing,
            )
        except LeaseLost:
            return None  # logged `wake.cancelled` (lease lost); the row says `aborted` if it still could
        finally:
            self.running.pop(asyncio.current_task(), None)  # type: ignore[arg-type]

    # -- operator controls: the outbox sender and one-shot wakes -------------------------------------

    def _operator_tasks(self) -> list[asyncio.Task[Any]]:
        assert self.sender is not None
        return [
            asyncio.create_task(self.sender.loop(), name="outbox"),
            asyncio.create_task(self._oneshot_loop(), name="oneshots"),
        ]

    async def close_unrecorded(self) -> None:
        """Wakes a dead replica claimed and never recorded get their rows (`wake.daemon.orphans`)."""
        assert self.session is not None
        await orphans.sweep(self.session, replica_id=self.replica_id, heartbeat_ttl_s=self.heartbeat_ttl_s, now=self.now())

    @property
    def heartbeat_ttl_s(self) -> float:
        """How long a replica's heartbeat lives after its last beat."""
        return self.ownership.ttl_s  # the same TTL the ownership reads membership by

    async def _oneshot_loop(self) -> None:
        """Hand every due one-shot (`wake at`) to a task; its claim decides which replica runs it.
        Once a heartbeat's lifetime, give the one-shots a dead claimer left their rows."""
        assert self.stores is not None
        unknown: set[Any] = set()
        swept = self.now()
        while not self.stopping:
            if (self.now() - swept).total_seconds() >= self.heartbeat_ttl_s:
                swept = self.now()
                await self.close_unrecorded()
            try:
                async with self.stores.pg_conn() as conn:
                    due = await controls.due_oneshots(conn, self.now())
            except Exception as exc:  # PostgreSQL away: the one-shots wait in their table
                log.warning("oneshot.poll_failed", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
                due = []
            for shot in due:
                agent = self.config.agents.get(shot.agent_id)
                if agent is None or shot.tier not in agent.tiers:
                    if shot.wake_id not in unknown:
                        unknown.add(shot.wake_id)
                        log.warning("oneshot.unconfigured", agent=shot.agent_id, tier=shot.tier, wake_id=str(shot.wake_id))
                    continue
                if shot.wake_id not in self.oneshots_running and not self.stopping:
                    self.oneshots_running.add(shot.wake_id)
                    self._spawn(self.run_oneshot(shot), name=f"at:{shot.agent_id}/{shot.tier}:{shot.wake_id}")
            await asyncio.sleep(self.config.daemon.poll_s)

    async def run_oneshot(self, shot: controls.OneShot) -> None:
        """One due one-shot through the one claim path: claimed on its own row, then leased and run."""
        request = WakeRequest(agent_id=shot.agent_id, tier=Tier(shot.tier), trigger=Trigger.at, wake_id=shot.wake_id)
        try:
            async with self.turns:
                if self.stopping:
                    return  # never claimed: the next start (or another replica) runs it
                log.info("oneshot.due", agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id), fire_at=shot.fire_at.isoformat())
                wait_s = 0.0 if request.tier in NO_WAIT_TIERS else self.config.daemon.busy_wait_s
                await self._leased(request, slot_claim=claim.Claim(by=self.replica_id), wait_s=wait_s)
        finally:
            self.oneshots_running.discard(shot.wake_id)

    # -- manual wakes through Redis -----------------------------------------------------------------

    async def _trigger_loop(self) -> None:
        """Take `wake trigger` requests onto this replica's taken list (`control.next_request`),
        beating first: a replica holding taken requests and no heartbeat is a dead one
        (`wake.daemon.orphans`)."""
        assert self.stores is not None
        beaten = False
        while not self.stopping:
            try:
                if not beaten:
                    await control.heartbeat(self.stores.redis, self.state(), ttl_s=self.heartbeat_ttl_s)
                    beaten = True
                request = await control.next_request(self.stores.redis, TRIGGER_POP_S, taken_by=self.replica_id)
            except Exception as exc:  # Redis away: keep trying, the heartbeat says it too
                log.warning("daemon.trigger_poll_failed", error=logs.redact_text(str(exc)))
                await asyncio.sleep(TRIGGER_POP_S)
                continue
            if request is not None:
                if self.stopping:
                    await self._report(request.request_id, {"event": "refused", "reason": "the daemon is shutting down"})
                    await self._done(request)
                    return
                self._spawn(self._seen_through(request), name=f"manual:{request.agent}/{request.tier}")

    async def _seen_through(self, request: control.TriggerRequest) -> None:
        try:
            await self.run_manual(request)
        finally:
            await asyncio.shield(self._done(request))

    async def _done(self, request: control.TriggerRequest) -> None:
        """The request off this replica's taken list; Redis away: it stays, and this replica's
        heartbeat keeps others from closing it."""
        assert self.stores is not None
        try:
            await control.done(self.stores.redis, self.replica_id, request)
        except Exception as exc:  # noqa: BLE001 - logged; the request stays taken by a live replica
            log.warning("daemon.trigger_done_failed", request_id=request.request_id, error=logs.redact_text(str(exc)))

    async def _report(self, request_id: str, event: dict[str, Any]) -> None:
        assert self.stores is not None
        try:
            await control.report(self.stores.redis, request_id, event)
        except Exception as exc:  # the operator's wait times out; the ledger still has the wake
            log.warning("daemon.report_failed", request_id=request_id, report=event.get("event"), error=logs.redact_text(str(exc)))

    async def run_manual(self, request: control.TriggerRequest) -> None:
        """A `wake trigger` request: refused when the agent or tier is unknown or the agent busy."""
        assert self.stores is not None
        log.info("trigger.received", request_id=request.request_id, agent=request.agent, tier=request.tier)
        agent = self.config.agents.get(request.agent)
        if agent is None or request.tier not in agent.tiers:
            known = ", ".join(f"{a}/{t}" for a, conf in self.config.agents.items() for t in conf.tiers)
            what = f"agent {request.agent!r}" if agent is None else f"tier {request.tier!r} of agent {request.agent!r}"
            await self._report(request.request_id, {"event": "refused", "reason": f"unknown {what}; configured: {known}"})
            return
        wake = WakeRequest(agent_id=request.agent, tier=Tier(request.tier), trigger=Trigger.manual, wake_id=request.wake_id)

        async def started(fenced: WakeRequest, held: lease.Lease) -> None:
            await self._report(request.request_id, {"event": "started", "wake_id": str(fenced.wake_id)})

        settled = {"event": "settled", "wake_id": str(wake.wake_id)}
        async with self.turns:
            try:
                outcome = await self._leased(wake, slot_claim=None, wait_s=0.0, on_running=started)
            except AgentBusy as busy:
                await self._report(request.request_id, {"event": "refused", "reason": str(busy).removesuffix(BUSY_HINT)})
                return
            except asyncio.CancelledError as exc:  # the canceller's reason, as the row has it (the drain timeout names itself)
                why = str(exc.args[0]) if exc.args and exc.args[0] else "cancelled"
                await asyncio.shield(self._report(request.request_id, {**settled, "status": "aborted", "note": None, "error": why}))
                raise
        if outcome is None:
            await self._report(request.request_id, {**settled, "status": "aborted", "note": None, "error": "lease lost"})
            return
        await self._report(request.request_id, {**settled, "status": outcome.status, "note": outcome.note, "error": outcome.error})

    # -- heartbeat, status, reload ------------------------------------------------------------------

    def state(self) -> control.ReplicaState:
        return control.ReplicaState(
            replica_id=self.replica_id, host=socket.gethostname(), pid=os.getpid(), version=__version__,
            started_at=self.started_at, heartbeat_at=self.now(), running=list(self.running.values()), next_fires=self.next_fires(),
            owned=self.owned_count(), leaving=self.stopping,
        )

    async def _heartbeat_loop(self) -> None:
        while True:  # at a fixed rate: a slow Redis must not stretch the beats past the heartbeat's TTL
            began = time.monotonic()
            await self._beat()
            if self.notifier.enabled:
                self.notifier.status(self.status_text())
            await asyncio.sleep(max(0.0, self.config.daemon.heartbeat_s - (time.monotonic() - began)))

    async def _beat(self) -> None:
        """Publish the heartbeat, then (sharing agents) read the membership and take this
        replica's share of it (`wake.daemon.ownership`). A heartbeat that could not be published
        for a whole TTL first drops every agent: the others may have taken them."""
        assert self.stores is not None
        if self.shared and self.ownership.owned and not self.ownership.fresh():
            self._apply(self.ownership.lapse())
        at = time.monotonic()
        try:
            await control.heartbeat(self.stores.redis, self.state(), ttl_s=self.ownership.ttl_s)
        except Exception as exc:  # Redis away: the replica just looks dead to `wake status` meanwhile
            log.warning("daemon.heartbeat_failed", error=logs.redact_text(str(exc)))
            return
        self.ownership.beat(at)
        if not self.shared or self.stopping:
            return
        try:
            members, left = await ownership.read_membership(self.stores.redis, self.ownership.members)
            if not self.ownership.assigned:  # read before this replica's own mark could be there
                self.ownership.resumed = await ownership.cluster_resumed(self.stores.redis, self.replica_id)
        except Exception as exc:  # keep the share it has; the heartbeat's TTL bounds how long
            log.warning("ownership.read_failed", error=logs.redact_text(str(exc)))
            return
        before = self.ownership.members
        self._apply(self.ownership.update(members, self.config.agents, left))
        if self.ownership.members != before:
            log.info("ownership.members", members=list(self.ownership.members), owned=len(self.ownership.owned))
        try:
            await ownership.mark_member(self.stores.redis, self.replica_id)
        except Exception as exc:  # the next beat writes it again
            log.warning("ownership.mark_failed", error=logs.redact_text(str(exc)))

    async def _leave(self) -> None:
        """Stopping: say so in the heartbeat (the others drop this replica from the membership at
        their next beat and take its agents while it drains) and leave a mark that it was on purpose."""
        assert self.stores is not None
        self._apply(self.ownership.leave())
        try:
            await asyncio.wait_for(self._leaving_beat(), timeout=max(1.0, self.config.daemon.heartbeat_s))
        except Exception as exc:  # Redis away: the others take over when the heartbeat expires
            log.warning("ownership.leave_failed", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))

    async def _leaving_beat(self) -> None:
        assert self.stores is not None
        await ownership.mark_left(self.stores.redis, self.replica_id, 2 * self.ownership.ttl_s)
        if not [m for m in self.ownership.members if m != self.replica_id]:  # the last member: the cluster stops on purpose
            await ownership.forget_cluster(self.stores.redis, self.replica_id)
        await control.heartbeat(self.stores.redis, self.state(), ttl_s=self.ownership.ttl_s)

    async def reload(self) -> bool:
        """SIGHUP: validate and load the config file again, and reschedule; a bad one changes nothing."""
        path = self.config.path
        try:
            new = load_config_file(path)
            registry = session.build_registry(new)
            channels.check_routes(new)
        except WakeError as exc:
            log.error("daemon.reload_failed", path=str(path), error=str(exc), kept=self.config.config_hash()[:12])
            self.notifier.status(f"reload failed, old config kept: {exc}; " + self.status_text())
            return False
        restart_only = [k for k in ("postgres", "redis", "neo4j", "state_dir") if getattr(new, k) != getattr(self.config, k)]
        if new.tools.mcp != self.config.tools.mcp:  # the running sessions are the old config's
            restart_only.append("tools.mcp")
        if self.session is not None:
            registry.attached.extend(self.session.registry.attached)  # the MCP servers stay open across a reload
        if restart_only:
            log.warning("daemon.reload_needs_restart", keys=restart_only)
        self.config = new
        if self.metrics is not None:
            self.metrics.set_agents(agent_infos(new))
        if self.session is not None:
            self.session = dataclasses.replace(self.session, config=new, registry=registry)
        if not self.stopping:
            self._schedule_all()
            if self.shared:
                self._apply(self.ownership.update(self.ownership.members, new.agents, {}))
        log.info("daemon.reloaded", path=str(path), config_hash=new.config_hash()[:12], jobs=len(self.triggers))
        self.notifier.status(self.status_text())
        return True
