"""The process's signals, delivered to its event loop however busy the loop is.

asyncio's `loop.add_signal_handler` learns of a signal only from one byte that the C-level handler
writes into the loop's self-pipe, the same pipe every `call_soon_threadsafe` writes a byte to. A
thread that wakes the loop many times while the loop is busy (APScheduler's scheduler, woken once
for each job a replica adds as it takes agents over) fills that pipe; the signal's byte is then
dropped (`BlockingIOError` on the wakeup fd) and the handler never runs. A replica lost a SIGTERM
that way: it kept working until it was killed (docs/performance.md).

Here the signal is delivered by a Python-level handler, which CPython runs in the main thread from a
flag the C handler sets, whatever any pipe holds; it hands the callback to the loop with
`call_soon_threadsafe`, as `asyncio.Runner` does for SIGINT, which queues it whether or not the
self-pipe has room. The wakeup fd is a socket pair of this module's own, so that a signal caught
while the main thread sleeps in the selector wakes it: nothing else writes there.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

Handler = Callable[[int], None]


class Installed:
    """The handlers of one loop, installed by `install` and taken down by `remove`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, handlers: Mapping[int, Handler]) -> None:
        self._loop = loop
        self._handlers = dict(handlers)
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._previous: dict[int, Any] = {}
        self._previous_fd: int | None = None  # None until this wakeup fd is set
        self._removed = False

    def _install(self) -> None:
        # set_wakeup_fd raises ValueError off the main thread, before anything is changed
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._loop.add_reader(self._reader.fileno(), self._drain)
        for sig in self._handlers:
            self._previous[sig] = signal.signal(sig, self._on_signal)
            signal.siginterrupt(sig, False)  # SA_RESTART, as asyncio sets it

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """CPython runs this in the main thread, between two bytecodes: queue the handler on the loop."""
        handler = self._handlers.get(signum)
        if handler is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(handler, signum)

    def _drain(self) -> None:
        """The wakeup bytes only woke the selector: the Python-level handler has the signal."""
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while self._reader.recv(4096):
                pass

    def remove(self) -> None:
        """Put back what was there before (idempotent)."""
        if self._removed:
            return
        self._removed = True
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        if self._previous_fd is not None:
            signal.set_wakeup_fd(self._previous_fd)
        if not self._loop.is_closed():
            self._loop.remove_reader(self._reader.fileno())
        self._reader.close()
        self._writer.close()


def install(loop: asyncio.AbstractEventLoop, handlers: Mapping[int, Handler]) -> Installed:
    """Call `handlers[sig](sig)` on `loop` for each signal that arrives, until `.remove()`.
    From the main thread only (signal handlers can be set nowhere else)."""
    installed = Installed(loop, handlers)
    try:
        installed._install()
    except BaseException:
        installed.remove()
        raise
    return installed
