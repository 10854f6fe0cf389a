"""Serving the console: uvicorn in the caller's event loop (the daemon's, or `wake console`'s),
stopped by an event, with its own signal handling off (the process's handlers stay in charge)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import urllib.parse
from collections.abc import Callable, Iterator

import uvicorn

from wake import logs
from wake.config import Config
from wake.console import app, guard
from wake.daemon import listen_socket, service
from wake.errors import ListenError
from wake.stores import Stores

log = logs.get("wake.console")

DEFAULT_LISTEN = "127.0.0.1:8087"  # `wake console` with no [console] listen and no --listen
SHUTDOWN_S = 5.0  # open live streams are ended, then connections get this long to close


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the daemon (or `wake console`) owns SIGTERM/SIGINT/SIGHUP


def bind(listen: str) -> socket.socket:
    """The listening socket (`wake.daemon.listen_socket.bind`). Raises ListenError (exit 78)."""
    return listen_socket.bind(listen, "console")


def guard_for(config: Config, listen: str, *, read_only: bool) -> guard.Guard:
    """The console's guard, read once at start: an address other than loopback with no token is a
    ListenError (exit 78) before anything is served."""
    conf = config.console
    named = [*conf.hosts, *([h] if conf.url and (h := urllib.parse.urlsplit(conf.url).hostname) else [])]
    return guard.Guard.for_listen(listen, token_credential=conf.token_credential, read_only=read_only, hosts=named,
                                  session_ttl_s=conf.session_ttl_s)


class Runner:
    """One console server: `await runner.run(stores, stop)` serves until `stop` is set. `url` is
    known once `started` is set (with port 0, the port the system picked)."""

    def __init__(self, config: Callable[[], Config], *, listen: str, guard: guard.Guard) -> None:
        self.config = config
        self.guard = guard
        self.listen = listen
        self.started = asyncio.Event()
        self.url = ""

    async def __call__(self, daemon: service.Daemon) -> None:
        """The daemon's companion (`[console] listen`): served from the daemon's stores, with its
        current config, until it stops."""
        self.config = lambda: daemon.config  # a SIGHUP reload shows on the next page
        await self.run(daemon.stores, daemon.stop)

    name = "console"

    async def run(self, stores: Stores, stop: asyncio.Event) -> None:
        console = app.Console(config=self.config, stores=stores, guard=self.guard)
        sock = bind(self.listen)
        self.url = listen_socket.url_of(sock)
        server = _Server(uvicorn.Config(
            app.build(console), log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=int(SHUTDOWN_S),
        ))
        serving = asyncio.create_task(server.serve(sockets=[sock]), name="console-server")
        log.info("console.listening", url=self.url, read_only=self.guard.read_only, token=self.guard.token is not None,
                 loopback=self.guard.loopback)
        self.started.set()
        try:
            done, _ = await asyncio.wait({serving, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED)
            if serving in done:
                serving.result()  # uvicorn ended by itself: say why
                raise ListenError(f"the console server on {self.url} stopped")
        finally:
            console.stop.set()
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(serving), SHUTDOWN_S * 2)
            sock.close()
            log.info("console.stopped", url=self.url)
