"""`[inbox] listen`: the daemon's endpoint for a human's message to an agent (docs/channels.md).

One route, `POST /messages`, with a JSON body
`{"agent": ..., "author": ..., "text": ..., "idempotency_key": ..., "channel": ...}` and two headers:
`X-Wake-Timestamp` (Unix seconds) and `X-Wake-Signature: sha256=<HMAC-SHA256 of "<timestamp>.<body>">`
under the `[inbox] secret_credential`, the scheme of the outgoing webhooks with the time signed
too. The checks run in this order, and a refused request stores nothing:

1. a body over `max_body_bytes` → 413 (by its Content-Length before a byte is read, or as it streams);
2. no signature, a malformed one (a non-ASCII header too), or one that does not match → 401;
3. a timestamp further than `max_skew_s` from the daemon's clock → 401 (a replayed request);
4. a body that is not a JSON object with the fields above → 400 (nested too deeply, or a field
   holding a NUL, a lone surrogate, or, outside `text`, a control character, is not);
5. an agent that is not configured → 404;
6. an idempotency key the agent already has a message for → 409 (a replay within the window,
   or a relay's retry: the message is stored already; the answer names it).

A message that passes is stored verbatim in `human_contact` (as `wake tell` stores one), so a
`saw` fact can cite it and the next wake's posture and gate see it; with `[inbox] wake_tier` it
also asks for a one-shot wake of that tier (`wake at`'s mechanism), at most one per agent per
`wake_min_interval_s`. The answer is 201 with the message id and the wake it asked for, if any.

Served by uvicorn in the daemon's event loop, with uvicorn's signal handling off (the daemon owns
SIGTERM, SIGINT and SIGHUP).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import hmac
import json
import math
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import ledgers.inbox
from wake import clock, logs, secrets
from wake.config import Config, clip, unstorable
from wake.daemon import listen_socket
from wake.errors import (
    InboxRefused,  # short: every check below raises it
    ListenError,
)
from wake.stores import Stores

log = logs.get("wake.inbox")

SIGNATURE_HEADER = "X-Wake-Signature"
TIMESTAMP_HEADER = "X-Wake-Timestamp"
MAX_KEY_CHARS = 200
MAX_FIELD_CHARS = 200  # author and channel
SHUTDOWN_S = 5


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """What a sender puts in X-Wake-Signature for `body` sent at `timestamp`."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Message:
    agent: str
    author: str
    channel: str
    text: str
    idempotency_key: str


def _string(doc: dict[str, object], key: str, *, limit: int | None, default: str | None = None) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise InboxRefused(400, f"expected {key!r}: a non-empty string, got {clip(value)}")
    if limit is not None and len(value) > limit:
        raise InboxRefused(400, f"expected {key!r} of at most {limit} characters, got {len(value)}")
    if (why := unstorable(value, single_line=key != "text")) is not None:
        raise InboxRefused(400, f"{key!r} {why}")
    return value


def parse_message(body: bytes) -> Message:
    """The request's JSON object, or Refused(400) with what was expected."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise InboxRefused(400, "expected a JSON object as the body") from None
    except RecursionError:  # `[[[[…` deeper than the parser goes
        raise InboxRefused(400, "expected a JSON object as the body, got one nested too deeply") from None
    if not isinstance(doc, dict):
        raise InboxRefused(400, f"expected a JSON object as the body, got {type(doc).__name__}")
    return Message(
        agent=_string(doc, "agent", limit=64), author=_string(doc, "author", limit=MAX_FIELD_CHARS),
        channel=_string(doc, "channel", limit=MAX_FIELD_CHARS, default="inbox"), text=_string(doc, "text", limit=None),
        idempotency_key=_string(doc, "idempotency_key", limit=MAX_KEY_CHARS),
    )


class Inbox:
    """The endpoint's application: its checks, then the ledger."""

    def __init__(self, config: Callable[[], Config], stores: Stores, *, secret: secrets.Secret, now: Callable[[], dt.datetime] = clock.now) -> None:
        self.config = config
        self.stores = stores
        self.secret = secret
        self.now = now
        self.app = Starlette(routes=[Route("/messages", self.receive, methods=["POST"])])

    async def receive(self, request: Request) -> JSONResponse:
        try:
            body = await self._body(request)
            self._verify(request, body)
            message = parse_message(body)
            return await self._store(message)
        except InboxRefused as refused:
            log.warning("inbox.refused", status=refused.status, reason=refused.reason, peer=request.client.host if request.client else None)
            return JSONResponse({"error": refused.reason}, status_code=refused.status)

    async def _body(self, request: Request) -> bytes:
        cap = self.config().inbox.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and (not (declared.isascii() and declared.isdigit()) or int(declared) > cap):
            raise InboxRefused(413, f"the body is over {cap} bytes (Content-Length {clip(declared)})")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > cap:
                raise InboxRefused(413, f"the body is over {cap} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _verify(self, request: Request, body: bytes) -> None:
        given = request.headers.get(SIGNATURE_HEADER)
        stamp = request.headers.get(TIMESTAMP_HEADER)
        if not given or not stamp:
            raise InboxRefused(401, f"unsigned: expected {SIGNATURE_HEADER} and {TIMESTAMP_HEADER} (docs/channels.md)")
        if not stamp.isascii():
            raise InboxRefused(401, f"expected {TIMESTAMP_HEADER} in Unix seconds (ASCII digits), got {clip(stamp)}")
        try:
            sent_at = float(stamp)
        except ValueError:
            raise InboxRefused(401, f"expected {TIMESTAMP_HEADER} in Unix seconds, got {clip(stamp)}") from None
        if not given.isascii():  # compare_digest takes ASCII strings only
            raise InboxRefused(401, f"expected {SIGNATURE_HEADER} as sha256=<hex digest>, got non-ASCII {clip(given)}")
        if not hmac.compare_digest(signature(self.secret.reveal(), stamp, body), given):
            raise InboxRefused(401, "the signature does not match the body and timestamp")
        skew_s = abs(self.now().timestamp() - sent_at) if math.isfinite(sent_at) else math.inf
        max_skew_s = self.config().inbox.max_skew_s
        if skew_s > max_skew_s:
            raise InboxRefused(401, f"replayed or delayed: signed {skew_s:.0f} s from now, more than max_skew_s = {max_skew_s:g}")

    async def _store(self, message: Message) -> JSONResponse:
        config = self.config()
        agent = config.agents.get(message.agent)
        if agent is None:
            raise InboxRefused(404, f"no agent {clip(message.agent)} is configured")
        tier = config.inbox.wake_tier
        wake = ledgers.inbox.WakeAsk(tier=tier, min_interval_s=config.inbox.wake_min_interval_s) if tier and tier in agent.tiers else None
        async with self.stores.pg_conn() as conn:
            stored = await ledgers.inbox.record(
                conn, agent_id=message.agent, author=message.author, channel=message.channel, body=message.text,
                received_at=self.now(), idempotency_key=message.idempotency_key, wake=wake,
            )
        where = {"agent": message.agent, "message_id": str(stored.message_id), "channel": message.channel}
        if stored.duplicate:
            log.info("inbox.duplicate", **where)
            return JSONResponse(
                {"error": f"idempotency_key already recorded as message {stored.message_id}", "message_id": str(stored.message_id)},
                status_code=409,
            )
        log.info("inbox.received", chars=len(message.text), wake_id=str(stored.wake_id) if stored.wake_id else None, **where)
        answer: dict[str, object] = {
            "message_id": str(stored.message_id), "received_at": stored.received_at.isoformat(),
            "wake_id": str(stored.wake_id) if stored.wake_id else None,
        }
        if wake is not None and stored.wake_id is None and stored.last_wake_at is not None:
            answer["wake"] = f"not asked: the inbox woke {message.agent} at {stored.last_wake_at.isoformat()}, within wake_min_interval_s"
        return JSONResponse(answer, status_code=201)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the daemon owns SIGTERM/SIGINT/SIGHUP


def bind(listen: str) -> socket.socket:
    """The listening socket (`wake.daemon.listen_socket.bind`). Raises ListenError (exit 78)."""
    return listen_socket.bind(listen, "inbox")


class Endpoint:
    """The bound endpoint: `open` (at start, so a bad address or a missing secret stops the daemon
    with exit 78), then `serve` until the stop event is set."""

    def __init__(self, inbox: Inbox, sock: socket.socket) -> None:
        self.inbox = inbox
        self.sock = sock
        self.url = listen_socket.url_of(sock)

    @classmethod
    def open(cls, config: Callable[[], Config], stores: Stores, *, now: Callable[[], dt.datetime] = clock.now) -> Endpoint:
        settings = config().inbox
        assert settings.listen is not None
        secret = secrets.read_secret(settings.secret_credential)
        if secret is None or not secret.reveal():
            raise ListenError(
                f"the inbox needs its secret: credential {settings.secret_credential!r} not found in $CREDENTIALS_DIRECTORY "
                f"or ${secrets.env_name(settings.secret_credential)}"
            )
        return cls(Inbox(config, stores, secret=secret, now=now), bind(settings.listen))

    async def serve(self, stop: asyncio.Event) -> None:
        server = _Server(uvicorn.Config(self.inbox.app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=SHUTDOWN_S))
        serving = asyncio.create_task(server.serve(sockets=[self.sock]), name="inbox-server")
        log.info("inbox.listening", url=f"{self.url}/messages")
        stopping = asyncio.create_task(stop.wait(), name="inbox-stop")
        try:
            done, _ = await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if serving in done:
                serving.result()
                raise ListenError(f"the inbox server on {self.url} stopped")
        finally:
            stopping.cancel()
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(serving), SHUTDOWN_S * 2)
            self.sock.close()
