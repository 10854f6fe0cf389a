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
  owner records each `missed`, in `wake.daemon.jobs.fire`).
- `misfire_grace_time=None`: a late slot still runs, however late (the claim makes a late run
  safe: a slot some other replica ran is refused). Dropping it would be a silent gap.
- `max_instances=1`: the job body returns as soon as it has handed the slot to a task, so one
  instance never blocks the next slot; overlap between wakes of an agent is the lease's job,
  which (unlike APScheduler) sees every replica.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from ledgers.vocab import Trigger
from wake import __version__, clock, logs, stores
from wake.config import Config, load_config_file
from wake.context import WakeRequest
from wake.daemon import (
    beat,
    channels,
    control,
    dead_claimers,
    drain,
    inbox,
    jobs,
    manual,
    notify,
    oneshots,
    outbox,
    ownership,
    schedule,
    signals,
    spool,
    startup,
    supervise,
    wakes,
)
from wake.daemon.running import Running, Timing
from wake.errors import WakeError
from wake.observe import metrics
from wake.run import claim, cycle, session

log = logs.get("wake.daemon")

# How long the start waits for the companions to bind their addresses.
BIND_WAIT_S = 30.0


class Companion(Protocol):
    """A side task that a layer above runs inside the daemon (the console, `[console] listen`):
    started with the other side tasks once the stores are open, it returns once `daemon.stop` is set."""

    name: str

    async def __call__(self, daemon: Daemon) -> None: ...


@dataclass(kw_only=True)
class Daemon:
    """The process: what it is before its session is open (config, identity, the stop, the
    ownership, the spool, the supervisor), and `opened`, the `Running` parts, once `run` has
    opened it. The work is in the modules named in `wake.daemon.running`; the methods here are
    the names they and the tests call it by."""

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
        self.tasks: set[asyncio.Task[object]] = set()
        self.running: dict[asyncio.Task[object], dict[str, object]] = {}
        self.schedules: dict[tuple[str, str], schedule.Schedule] = {}
        self.triggers: dict[tuple[str, str], schedule.SlotTrigger] = {}
        self.handed: dict[tuple[str, str], dt.datetime] = {}  # the slot each job handed over last
        self.opened: Running | None = None  # built whole once the session is open (`open`)
        self.turns = asyncio.Semaphore(self.config.daemon.max_concurrent_wakes)
        self.metrics: metrics.Metrics | None = None
        self.oneshots_running: set[object] = set()  # one-shot wake ids handed to a task here
        self.spool = spool.Spool(by=self.replica_id, now=lambda: self.now())
        self.stop_signal: str | None = None
        self.signals: signals.Installed | None = None
        self.shared = self.config.daemon.ownership == "rendezvous"
        self.ownership = ownership.Ownership(replica_id=self.replica_id, ttl_s=ownership.TTL_BEATS * self.config.daemon.heartbeat_s)
        self.supervisor = supervise.Supervisor(stop=self.stop, now=lambda: self.now())

    def open(self, s: session.Session) -> Running:
        """The parts that exist once the session is open, built whole: `run` calls this, and so do
        the tests that drive a daemon's parts without `run`."""
        scheduler = AsyncIOScheduler(timezone=dt.UTC, job_defaults=jobs.JOB_DEFAULTS)
        self.opened = Running(session=s, scheduler=scheduler, sender=outbox.Sender(lambda: self.config, s.stores, owner=self.owner, now=self.now))
        return self.opened

    @property
    def live(self) -> Running:
        """The `Running` parts; only while the session is open."""
        if self.opened is None:
            raise RuntimeError("the daemon's session is not open: Daemon.run (or Daemon.open) opens it")
        return self.opened

    @property
    def session(self) -> session.Session:
        return self.live.session

    @property
    def stores(self) -> stores.Stores:
        return self.live.session.stores

    @stores.setter
    def stores(self, st: stores.Stores) -> None:
        self.opened = dataclasses.replace(self.live, session=dataclasses.replace(self.live.session, stores=st))

    @property
    def scheduler(self) -> AsyncIOScheduler:
        return self.live.scheduler

    @property
    def sender(self) -> outbox.Sender:
        return self.live.sender

    # -- the life of the process ------------------------------------------------------------------

    async def run(self) -> int:
        """Run until SIGTERM/SIGINT, then drain; returns the exit status (0 after a clean drain).
        Every address is bound before anything is scheduled: one that cannot be raises ListenError
        (exit 78) before any slot is claimed."""
        session.require_embedded(self.config, session.every_tier(self.config))  # `wake model fetch` first: one line, exit 69
        async with session.open_session(self.config, keep_alive=True) as s:
            channels.check_routes(self.config)  # every Apprise route's credentials, before anything is scheduled
            live = self.open(s)
            try:
                await self._close_abandoned_at_start()
            except Exception as exc:  # a store that fails under the start is exit 69 in one line, as one that cannot be reached
                unavailable = stores.outage(s.stores, exc)
                if unavailable is None or unavailable is exc:
                    raise
                raise unavailable from exc
            self._warm_workspaces()
            exposition = self._serve_metrics()
            try:
                endpoint = inbox.Endpoint.open(lambda: self.config, s.stores, now=self.now) if self.config.inbox.listen else None
                side = [self.supervisor.start(c.name, functools.partial(c, self)) for c in self.companions]
                await self._companions_bound(side)
                self.supervisor.ready = True
                await self._serve(live, side, endpoint)
            finally:
                if exposition is not None:
                    exposition.close()
                    metrics.install(None)
        log.info("daemon.stopped", replica=self.replica_id)
        return 0

    async def _companions_bound(self, side: list[asyncio.Task[Any]]) -> None:
        """Wait until each companion that binds an address (a `started` event: the console) has
        bound it; one that could not ends the start here (its ListenError, exit 78)."""
        events = [e for c in self.companions if isinstance(e := getattr(c, "started", None), asyncio.Event)]
        bound = asyncio.gather(*(e.wait() for e in events))
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self.stop.wait()), asyncio.ensure_future(self.supervisor.failed.wait()), bound}
        await asyncio.wait(waits, timeout=BIND_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        if self.supervisor.fatal is not None:
            await drain.cancelled(side)
            raise self.supervisor.fatal

    async def _serve(self, live: Running, side: list[asyncio.Task[Any]], endpoint: inbox.Endpoint | None) -> None:
        """Schedule, start the side tasks (each supervised: `wake.daemon.supervise`), serve until stopped, drain."""
        st, sender = live.session.stores, live.sender
        if self.handle_signals:
            self._install_signals()
        try:
            live.scheduler.start()
            self._schedule_all()
            if self.shared:
                await beat.beat(self)  # the first membership read gives this replica its share, and its catch-up
            else:
                jobs.catch_up(self)
            self.notifier.ready(self.status_text())  # stores reachable, schema checked, jobs scheduled
            startup.settle_heap()
            start, session_ = self.supervisor.start, live.session
            side += [
                start("watchdog", lambda: notify.watchdog_loop(self.notifier)),
                start("heartbeat", self._heartbeat_loop),
                start("triggers", self._trigger_loop),
                start("outbox", sender.loop),
                start("oneshots", self._oneshot_loop),
                start("spool", lambda: self.spool.loop(session_)),
            ]
            if endpoint is not None:
                side.append(start("inbox", lambda: endpoint.serve(self.stop)))
            if self.metrics is not None:
                m = self.metrics
                side.append(start("loop-lag", lambda: metrics.measure_loop_lag(m)))
            if st.embedded:
                side.append(start("engines", lambda: startup.engine_loop(lambda: self.config, st.embedded)))
            log.info("daemon.ready", replica=self.replica_id, jobs=len(self.triggers), embedded=list(st.embedded), status=self.status_text(),
                     event_loop=type(asyncio.get_running_loop()).__module__.partition(".")[0])  # the loop running: uvloop or asyncio
            await self.stop.wait()
            await drain.shutdown(self, side)
        finally:
            if self.signals is not None:
                self.signals.remove()
                self.signals = None

    def _warm_workspaces(self) -> None:
        startup.warm_workspaces(self.config)

    async def _close_abandoned_at_start(self) -> None:
        """The start-up pass over what a dead process left (`wake.daemon.startup.close_abandoned`)."""
        await startup.close_abandoned(self.live.session, owner=self.owner, now=self.now(), close_unrecorded=self.close_unrecorded)

    def _serve_metrics(self) -> metrics.Exposition | None:
        """`[metrics] listen`: the Prometheus endpoint, served from this process (docs/metrics.md)."""
        listen = self.config.metrics.listen
        if listen is None:
            return None
        self.metrics = metrics.Metrics(agents=startup.agent_infos(self.config), version=__version__)
        self.metrics.set_running(lambda: list(self.running.values()))
        self.metrics.set_owned(lambda: float(self.owned_count()))
        self.metrics.set_side_tasks_down(lambda: float(len(self.supervisor.down)))
        if self.opened is not None:
            sender = self.opened.sender
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
        """SIGTERM and SIGINT stop, SIGHUP reloads (`wake.daemon.signals`: delivered even while a
        thread floods the loop's self-pipe, as APScheduler does when a replica adds many jobs)."""

        def reload(_sig: int) -> None:
            self._spawn(self.reload(), name="reload")

        self.signals = signals.install(
            asyncio.get_running_loop(),
            {signal.SIGTERM: self.request_stop, signal.SIGINT: self.request_stop, signal.SIGHUP: reload},
        )

    # -- schedules (wake.daemon.jobs) -------------------------------------------------------------

    def _schedule_all(self) -> None:
        jobs.schedule_all(self)

    def owns(self, agent_id: str) -> bool:
        return not self.shared or agent_id in self.ownership.owned

    def owned_count(self) -> int:
        return len(self.ownership.owned) if self.shared else len(self.config.agents)

    def _apply(self, change: ownership.Change) -> None:
        jobs.apply(self, change)

    def next_fires(self, n: int = jobs.NEXT_FIRES) -> list[dict[str, object]]:
        return jobs.next_fires(self, n)

    def status_text(self) -> str:
        fires = self.next_fires(1)
        head = f"next wake {fires[0]['agent']}/{fires[0]['tier']} at {fires[0]['at']}" if fires else "no wake scheduled"
        return f"{head}; {len(self.running)} running"

    # -- one wake (wake.daemon.wakes) -------------------------------------------------------------

    def _spawn(self, coro: object, *, name: str) -> asyncio.Task[object]:
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
        await wakes.run_slot(self, self.live, sched, slot, trigger, jitter_s=jitter_s)

    async def _leased(
        self, request: WakeRequest, *, by: str | None, wait_s: float, timing: Timing | None = None, request_id: str | None = None,
    ) -> cycle.WakeOutcome | None:
        return await wakes.leased(self, self.live, request, by=by, wait_s=wait_s, timing=timing, request_id=request_id)

    # -- side tasks: one-shots, manual wakes, the heartbeat -------------------------------------------

    async def close_unrecorded(self) -> None:
        """Wakes a dead replica claimed and never recorded get their rows (`wake.daemon.dead_claimers`)."""
        await dead_claimers.sweep(self.live.session, replica_id=self.replica_id, heartbeat_ttl_s=self.heartbeat_ttl_s, now=self.now())

    @property
    def heartbeat_ttl_s(self) -> float:
        """How long a replica's heartbeat lives after its last beat."""
        return self.ownership.ttl_s  # the same TTL the ownership reads membership by

    async def _oneshot_loop(self) -> None:
        await oneshots.loop(self)

    async def _trigger_loop(self) -> None:
        await manual.loop(self)

    async def run_manual(self, request: control.TriggerRequest) -> None:
        await manual.run(self, request)

    def state(self) -> control.ReplicaState:
        return beat.state(self)

    async def _heartbeat_loop(self) -> None:
        await beat.loop(self)

    async def reload(self) -> bool:
        """SIGHUP: validate and load the config file again, and reschedule; a bad one changes nothing."""
        path = self.config.path
        try:
            new = load_config_file(path)
            registry = session.build_registry(new)
            channels.check_routes(new)
            session.require_embedded(new, session.every_tier(new))
        except WakeError as exc:
            log.error("daemon.reload_failed", path=str(path), error=str(exc), kept=self.config.config_hash()[:12])
            self.notifier.status(f"reload failed, old config kept: {exc}; " + self.status_text())
            return False
        restart_only = [k for k in ("postgres", "redis", "neo4j", "state_dir") if getattr(new, k) != getattr(self.config, k)]
        if new.tools.mcp != self.config.tools.mcp:  # the running sessions are the old config's
            restart_only.append("tools.mcp")
        if self.opened is not None:
            registry.attached.extend(self.opened.session.registry.attached)  # the MCP servers stay open across a reload
        if restart_only:
            log.warning("daemon.reload_needs_restart", keys=restart_only)
        self.config = new
        if self.metrics is not None:
            self.metrics.set_agents(startup.agent_infos(new))
        if self.opened is not None:
            self.opened = dataclasses.replace(self.opened, session=dataclasses.replace(self.opened.session, config=new, registry=registry))
        if not self.stopping:
            self._schedule_all()
            if self.shared:
                self._apply(self.ownership.update(self.ownership.members, new.agents, {}))
        log.info("daemon.reloaded", path=str(path), config_hash=new.config_hash()[:12], jobs=len(self.triggers))
        self.notifier.status(self.status_text())
        return True
