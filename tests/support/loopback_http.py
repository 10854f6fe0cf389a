"""A test's HTTP server on a free loopback port (the scripted model, the recording proxy, the webhook
receiver): its handler served from a daemon thread between `start` and `stop`, or in a `with`."""

from __future__ import annotations

import http.server
import threading
from typing import Self

SHUTDOWN_POLL_S = 0.02


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A keep-alive handler that logs nothing; `body()` reads the request's body."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length", "0")))


class LoopbackServer:
    """The subclass builds its handler class and calls `_serve` in its `__init__`."""

    def _serve(self, handler: type[http.server.BaseHTTPRequestHandler], name: str, *, block_on_close: bool = True) -> None:
        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._http.daemon_threads = True
        self._http.block_on_close = block_on_close
        # `shutdown` waits for the loop to see its flag: socketserver looks every poll_interval
        # (0.5 s by default, which every test that used a server waited out at its end)
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, name=name, daemon=True)

    @property
    def root_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
