"""The daemon's stop: stop firing, say STOPPING=1, leave the membership, drain the wakes in
flight within `drain_s`, cancel what remains (each settles `aborted`, the drain timeout its
reason), then the side tasks, boundedly."""

from __future__ import annotations

import asyncio
import contextlib

from wake import logs
from wake.daemon import beat, control
from wake.daemon.running import Host

log = logs.get("wake.daemon")

# A cancelled wake gets this long to settle `aborted` before the daemon stops waiting for it.
CANCEL_GRACE_S = 10.0
SIDE_CANCEL_TRIES = 3


async def cancelled(tasks: list[asyncio.Task[object]]) -> None:
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


async def shutdown(daemon: Host, side: list[asyncio.Task[object]]) -> None:
    """Stop firing, say STOPPING=1, drain within `drain_s`, cancel what remains, release."""
    daemon.stopping = True
    live = daemon.opened
    if live is not None and live.scheduler.running:
        live.scheduler.shutdown(wait=False)
    drain_s = daemon.config.daemon.drain_s
    daemon.notifier.stopping(f"draining {len(daemon.running)} wake(s), up to {drain_s:g}s")
    if daemon.shared:
        await beat.leave(daemon)
    pending = {t for t in daemon.tasks if not t.done()}
    if pending:
        log.info("daemon.draining", wakes=len(daemon.running), tasks=len(pending), drain_s=drain_s)
        _, pending = await asyncio.wait(pending, timeout=drain_s)
    if pending:
        log.warning("daemon.drain_timeout", cancelled=len(pending))
        reason = f"drain timeout on {daemon.stop_signal or 'stop'} after {drain_s:g} s"  # the aborted rows' error
        for task in pending:
            task.cancel(reason)
        await asyncio.wait(pending, timeout=CANCEL_GRACE_S)
    daemon.spool.lost()
    await cancelled(side)
    with contextlib.suppress(Exception):
        await control.forget(daemon.live.session.stores.redis, daemon.replica_id)
