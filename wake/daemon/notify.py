"""systemd's notify protocol, by hand: one datagram per message to `$NOTIFY_SOCKET`.

Small enough not to need a library (sd_notify(3) is a newline-separated `KEY=value` datagram to a
unix socket; an address starting with `@` is in the abstract namespace). Without `NOTIFY_SOCKET`
every call is a no-op, so the daemon runs the same outside systemd. A failed send is logged, never
raised: the service must not die because its supervisor's socket hiccuped.

The watchdog is pinged from the event loop (`watchdog_loop`), so a blocked loop stops the pings
and systemd restarts the service.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping

from wake import logs

log = logs.get("wake.notify")


class Notifier:
    def __init__(self, socket_path: str | None, *, watchdog_usec: int | None = None) -> None:
        self.socket_path = socket_path or None
        self.watchdog_usec = watchdog_usec

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Notifier:
        usec: int | None = None
        pid = environ.get("WATCHDOG_PID")
        if environ.get("WATCHDOG_USEC", "").isdigit() and (not pid or pid == str(os.getpid())):
            usec = int(environ["WATCHDOG_USEC"]) or None
        return cls(environ.get("NOTIFY_SOCKET"), watchdog_usec=usec)

    @property
    def enabled(self) -> bool:
        return self.socket_path is not None

    @property
    def watchdog_interval_s(self) -> float | None:
        """Half of `WatchdogSec=` (systemd's advice), or None when no watchdog is armed."""
        return self.watchdog_usec / 2_000_000 if self.watchdog_usec else None

    def send(self, *lines: str) -> bool:
        if self.socket_path is None:
            return False
        address = "\0" + self.socket_path[1:] if self.socket_path.startswith("@") else self.socket_path
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(address)
                sock.sendall("\n".join(lines).encode("utf-8"))
            return True
        except OSError as exc:
            log.warning("notify.failed", socket=self.socket_path, message=lines[0] if lines else "", error=str(exc))
            return False

    def ready(self, status: str | None = None) -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []), f"MAINPID={os.getpid()}")

    def stopping(self, status: str | None = None) -> bool:
        return self.send("STOPPING=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")


async def watchdog_loop(notifier: Notifier) -> None:
    """Ping `WATCHDOG=1` every `WatchdogSec/2` from the event loop, until cancelled."""
    interval = notifier.watchdog_interval_s
    if interval is None:
        return
    while True:
        notifier.watchdog()
        await asyncio.sleep(interval)
