"""A recording HTTP proxy on loopback, between wake and a real model server.

Every request is forwarded to `upstream` (a server root such as `http://127.0.0.1:8080`) as it
came, and answered with the upstream's status and body. Each exchange is recorded: path, request
JSON, status, response JSON. `rewrite(response_json)` may change a chat completion on its way
back (a live test renames a real tool call to a tool outside the binding); `widen(request_json)`
may change what the upstream is asked (a live test offers the model a tool outside the binding
on purpose; the recorded request keeps what wake sent). `max_tokens_cap`
lowers what the upstream is asked to generate (the recorded request keeps what wake asked for),
so a test of the room wake leaves does not wait for the room to be filled.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.loopback_http import LoopbackServer, QuietHandler

UPSTREAM_TIMEOUT_S = 600.0


@dataclass
class Exchange:
    path: str
    request: Any
    status: int
    response: Any

    @property
    def usage(self) -> dict[str, Any]:
        return dict(self.response.get("usage") or {}) if isinstance(self.response, dict) else {}

    @property
    def choice(self) -> dict[str, Any]:
        return dict(self.response["choices"][0]) if isinstance(self.response, dict) and self.response.get("choices") else {}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


class RecordingProxy(LoopbackServer):
    def __init__(self, upstream: str, rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.rewrite = rewrite
        self.max_tokens_cap: int | None = None
        self.widen: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.body()
                sent = _json(raw)
                forwarded = raw
                if isinstance(sent, dict) and self.path.endswith("/chat/completions"):
                    upstream = dict(sent)
                    if proxy.max_tokens_cap is not None and isinstance(sent.get("max_tokens"), int):
                        upstream["max_tokens"] = min(sent["max_tokens"], proxy.max_tokens_cap)
                    if proxy.widen is not None:
                        upstream = proxy.widen(upstream)
                    forwarded = json.dumps(upstream).encode() if upstream != sent else raw
                request = urllib.request.Request(proxy.upstream + self.path, data=forwarded, method="POST",
                                                 headers={"content-type": self.headers.get("content-type", "application/json")})
                try:
                    with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT_S) as res:
                        status, body = res.status, res.read()
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read()
                answer = _json(body)
                if proxy.rewrite is not None and status == 200 and isinstance(answer, dict) and "choices" in answer:
                    answer = proxy.rewrite(answer)
                    body = json.dumps(answer).encode()
                with proxy._lock:
                    proxy.exchanges.append(Exchange(self.path, sent, status, answer))
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._serve(Handler, "recording-proxy")

    @property
    def url(self) -> str:
        return f"{self.root_url}/v1"

    def completions(self) -> list[Exchange]:
        """The chat completion exchanges, in order."""
        with self._lock:
            return [e for e in self.exchanges if e.path.endswith("/chat/completions")]
