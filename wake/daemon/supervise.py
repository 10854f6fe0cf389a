"""The daemon's side tasks, supervised (docs/daemon.md, "Side tasks").

A side task that fails is started again after a backoff (doubling from `BACKOFF_MIN_S` to
`BACKOFF_MAX_S`, back to the minimum once it had stayed up longer than the maximum), and while
it waits it is *down*: logged `daemon.side_task_failed`, counted in `wake_side_task_restarts_total`,
shown in `wake_side_tasks_down` and in the heartbeat `wake status` reads. A `ListenError` (an
address that cannot be bound) before the daemon is ready cannot be restarted into working: it
ends the daemon with exit 78 before any slot is claimed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from wake import clock, logs
from wake.errors import ListenError
from wake.observe import metrics

log = logs.get("wake.daemon")

BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 60.0


@dataclass(kw_only=True)
class Down:
    """A side task waiting to be started again."""

    since: dt.datetime
    error: str
    restarts: int

    def as_dict(self) -> dict[str, object]:
        return {"since": self.since.isoformat(), "error": self.error, "restarts": self.restarts}


@dataclass(kw_only=True)
class Supervisor:
    """Runs each side task until `stop` is set, restarting the ones that fail."""

    stop: asyncio.Event
    now: Callable[[], dt.datetime] = clock.now
    down: dict[str, Down] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    ready: bool = False  # after the start: a ListenError is then restarted like any failure
    fatal: ListenError | None = None
    on_change: Callable[[], None] = lambda: None
    failed: asyncio.Event = field(default_factory=asyncio.Event)  # set at the first failure (the start stops waiting for a bind)

    def start(self, name: str, body: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        return asyncio.create_task(self._run(name, body), name=name)

    async def _run(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        backoff = BACKOFF_MIN_S
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                await body()
                return  # ended by itself (a watchdog without a watchdog, a loop that saw the stop)
            except ListenError as exc:
                if not self.ready:
                    self.fatal = self.fatal or exc
                    log.error("daemon.side_task_fatal", task=name, error=str(exc))
                    self.stop.set()
                    return
                error = str(exc)
            except Exception as exc:  # noqa: BLE001 - a side task's failure is logged and restarted, never the daemon's end
                error = logs.redact_text(f"{type(exc).__name__}: {exc}")[:500]
            if self.stop.is_set():
                return
            if time.monotonic() - began > BACKOFF_MAX_S:  # it had been up a while: a new failure, not a failing start
                backoff = BACKOFF_MIN_S
            self.failed.set()
            self.restarts[name] = self.restarts.get(name, 0) + 1
            self.down[name] = Down(since=self.now(), error=error, restarts=self.restarts[name])
            metrics.observe_side_task_failed(name)
            self.on_change()
            log.error("daemon.side_task_failed", task=name, error=error, restart_in_s=backoff, restarts=self.restarts[name])
            try:
                await asyncio.wait_for(self.stop.wait(), timeout=backoff)
                return
            except TimeoutError:
                pass
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            self.down.pop(name, None)
            self.on_change()
            log.info("daemon.side_task_restarted", task=name, restarts=self.restarts[name])

    def down_view(self) -> dict[str, dict[str, object]]:
        return {name: d.as_dict() for name, d in self.down.items()}
