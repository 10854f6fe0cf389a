"""What the daemon has only once its session is open (`Running`), and what the modules that do
its work need of it (`Host`, which `wake.daemon.service.Daemon` is): the start-up pass
(`wake.daemon.startup`), the jobs (`wake.daemon.jobs`), one wake (`wake.daemon.wakes`), the
one-shots (`wake.daemon.oneshots`), the heartbeat (`wake.daemon.beat`) and the drain
(`wake.daemon.drain`)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Protocol

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from ledgers.vocab import Trigger
from wake.config import Config
from wake.context import WakeRequest
from wake.daemon import control, notify, outbox, schedule, supervise
from wake.daemon.ownership import Change, Ownership
from wake.daemon.spool import Spool
from wake.run import cycle
from wake.run.session import Session


@dataclass(kw_only=True)
class Timing:
    """Where one wake's time went before and around it (the daemon's benchmark, bench/scheduler.py, reads these)."""

    agent: str = ""
    tier: str = ""
    slot: dt.datetime | None = None
    started: dt.datetime | None = None  # when the job handed the slot over
    due: dt.datetime | None = None  # when it was due to be handed over: the slot plus its jitter
    jitter_s: float = 0.0  # the slot's deterministic delay, waited before the claim
    claim_ms: float = 0.0
    lease_ms: float = 0.0
    release_ms: float = 0.0
    wake_ms: float = 0.0
    running_at: dt.datetime | None = None
    outcome: str = ""


@dataclass(frozen=True, kw_only=True)
class Running:
    """Built whole when `Daemon.run` has opened the session: the session (stores, registry), the
    scheduler (started once the start-up pass is done) and the outbox sender. A reload or a test's
    swapped stores replace it whole."""

    session: Session
    scheduler: AsyncIOScheduler
    sender: outbox.Sender


class Host(Protocol):
    """What the daemon's parts need of it (`wake.daemon.service.Daemon`)."""

    config: Config
    replica_id: str
    owner: str
    notifier: notify.Notifier
    stop: asyncio.Event
    stopping: bool
    stop_signal: str | None
    shared: bool
    turns: asyncio.Semaphore
    tasks: set[asyncio.Task[object]]
    running: dict[asyncio.Task[object], dict[str, object]]
    schedules: dict[tuple[str, str], schedule.Schedule]
    triggers: dict[tuple[str, str], schedule.SlotTrigger]
    handed: dict[tuple[str, str], dt.datetime]
    oneshots_running: set[object]
    spool: Spool
    ownership: Ownership
    supervisor: supervise.Supervisor
    started_at: dt.datetime
    timings: list[Timing] | None

    def now(self) -> dt.datetime: ...

    @property
    def live(self) -> Running: ...

    @property
    def opened(self) -> Running | None: ...

    @property
    def heartbeat_ttl_s(self) -> float: ...

    def owns(self, agent_id: str) -> bool: ...

    def owned_count(self) -> int: ...

    def status_text(self) -> str: ...

    def next_fires(self, n: int = ...) -> list[dict[str, object]]: ...

    def state(self) -> control.ReplicaState: ...

    def _spawn(self, coro: Coroutine[object, object, object], *, name: str) -> asyncio.Task[object]: ...

    def _apply(self, change: Change) -> None: ...

    async def close_unrecorded(self) -> None: ...

    async def run_slot(self, sched: schedule.Schedule, slot: dt.datetime, trigger: Trigger, *, jitter_s: float = 0.0) -> None: ...

    async def _leased(
        self, request: WakeRequest, *, by: str | None, wait_s: float, timing: Timing | None = None, request_id: str | None = None,
    ) -> cycle.WakeOutcome | None: ...
