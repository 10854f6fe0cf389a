"""A webhook receiver on loopback, as a careful production receiver is written: it checks the
HMAC-SHA256 signature, and acts on each idempotency key once (a repeat is answered 200 and not
acted on again). Real HTTP/1.1 on a real socket.

`fail_first` answers that many requests with 500 (after recording them, not acting); `refuse_with`
answers every request with that status (a permanent refusal: 400, 401); `hold_first`
acts on the first request, then holds its reply until `release()` (so a test can kill the sender
between the receiver acting and the sender hearing back).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass
from typing import Any

from tests.support.loopback_http import LoopbackServer, QuietHandler


@dataclass
class Received:
    headers: dict[str, str]
    raw: bytes
    signature_ok: bool | None  # None: no secret to check against

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.raw)


class Receiver(LoopbackServer):
    def __init__(self, *, secret: str | None = None, fail_first: int = 0, hold_first: bool = False, refuse_with: int | None = None) -> None:
        self.secret = secret
        self.fail_first = fail_first
        self.refuse_with = refuse_with
        self.hold_first = hold_first
        self.requests: list[Received] = []
        self.acted_on: list[str] = []  # idempotency keys, in the order they were first acted on
        self.arrived = threading.Event()  # set at each request
        self.held = threading.Event()  # set when the first request is being held
        self._release = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.body()
                status = receiver._handle({k.lower(): v for k, v in self.headers.items()}, raw)
                if status is None:  # held: the reply waits for release(), and may never be heard
                    receiver._release.wait(120)
                    status = 200
                try:
                    self.send_response(status)
                    self.send_header("content-length", "0")
                    self.end_headers()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._serve(Handler, "webhook-receiver", block_on_close=False)

    def _handle(self, headers: dict[str, str], raw: bytes) -> int | None:
        checked = None
        if self.secret is not None:
            expected = "sha256=" + hmac.new(self.secret.encode(), raw, hashlib.sha256).hexdigest()
            checked = hmac.compare_digest(expected, headers.get("x-wake-signature", ""))
        with self._lock:
            self.requests.append(Received(headers, raw, checked))
            first = len(self.requests) == 1
            self.arrived.set()
            if checked is False:
                return 401
            if len(self.requests) <= self.fail_first:
                return 500
            if self.refuse_with is not None:
                return self.refuse_with
            key = headers.get("idempotency-key", "")
            if key not in self.acted_on:
                self.acted_on.append(key)
        if first and self.hold_first:
            self.held.set()
            return None
        return 200

    def release(self) -> None:
        self._release.set()

    @property
    def url(self) -> str:
        return f"{self.root_url}/hook"

    def stop(self) -> None:
        self._release.set()
        super().stop()
