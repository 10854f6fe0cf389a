"""The outbox sender: a named side task of `wake daemon` that delivers what settled wakes queued.

Each pass takes the due rows of `wake_outbox` (locked for this sender, so replicas never send one
row at once) and delivers each through its `[delivery.<name>]` route, at least once:

- every attempt is counted in PostgreSQL before it is made, so a restart knows how many were spent;
- attempts are retried with exponential backoff (tenacity: `backoff_s`, doubling, at most
  `backoff_max_s`) until the route's `max_attempts`, then the row is `dead` with the last error
  (`wake outbox --failed`, `wake outbox --retry ID`);
- a sender killed between settle and send, or mid-send, leaves the row `pending`: when its lock
  runs out the next pass (of any replica, or of the restarted daemon) sends it again.

- a failure that sending again cannot help (`DeliveryFailed.permanent`: a 4xx other than 408, 425
  and 429, a refused login) is `dead` at once, after one attempt.

Every attempt carries the wake id as its idempotency key, so a receiver that keeps the keys it has
seen acts on each wake once. Webhooks are POSTed as JSON with `Idempotency-Key`, and with a secret,
`X-Wake-Signature: sha256=<HMAC-SHA256 of the body>`. Chat and mail channels go through Apprise
(`wake.daemon.channels`, docs/channels.md); those that cannot deduplicate carry the wake id.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import json
import sys
from collections.abc import Callable
from typing import Any

import httpx
import tenacity

from ledgers import outbox
from wake import clock, logs, secrets
from wake.config import Config, DeliveryRoute
from wake.daemon import channels
from wake.errors import DeliveryFailed
from wake.stores import Stores

log = logs.get("wake.outbox")

BATCH = 16  # rows one pass takes
LOCK_MARGIN_S = 2.0  # a row's lock outlasts its attempt and the wait after it by this much
SIGNATURE_HEADER = "X-Wake-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"


def body_of(row: outbox.Due) -> bytes:
    """The bytes every attempt of a row sends: the same each time, so the signature is too."""
    return json.dumps({**row.payload, "delivery_id": row.id, "route": row.route}, sort_keys=True, separators=(",", ":")).encode()


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


class Sender:
    def __init__(self, config: Callable[[], Config], stores: Stores, *, owner: str, now: Callable[[], dt.datetime] = clock.now) -> None:
        self._config = config
        self._stores = stores
        self._owner = owner
        self._now = now
        self._http = httpx.AsyncClient(follow_redirects=False)
        self.backlog = 0.0  # pending rows after the last pass (the metrics gauge reads it)

    async def loop(self) -> None:
        try:
            while True:
                try:
                    await self.deliver_due()
                except Exception as exc:  # PostgreSQL away: the rows wait, nothing is lost
                    log.warning("outbox.poll_failed", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
                await asyncio.sleep(self._config().daemon.poll_s)
        finally:
            await asyncio.shield(self._http.aclose())

    async def deliver_due(self) -> int:
        """One pass: deliver every due row this sender could lock; returns how many it took."""
        now = self._now()
        longest = max((r.timeout_s for r in self._config().delivery.values()), default=0.0)
        async with self._stores.pg_conn() as conn:
            rows = await outbox.take_due(conn, now=now, until=now + dt.timedelta(seconds=longest + LOCK_MARGIN_S), sender=self._owner, limit=BATCH)
        await asyncio.gather(*(self.deliver(row) for row in rows))
        async with self._stores.pg_conn() as conn:
            self.backlog = float(await outbox.backlog(conn))
        return len(rows)

    async def deliver(self, row: outbox.Due) -> None:
        where = {"delivery_id": row.id, "wake_id": str(row.wake_id), "route": row.route, "agent": row.agent_id}
        route = self._config().delivery.get(row.route)
        where["target"] = channels.route_target(self._config(), row.route)
        if route is None:
            await self._dead(row, f"unknown delivery route {row.route!r} (no [delivery.{row.route}] in the config)", where)
            return
        remaining = route.max_attempts - row.attempts
        if remaining <= 0:
            await self._dead(row, f"no attempts left ({row.attempts} of {route.max_attempts} made)", where)
            return
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(remaining),
            wait=tenacity.wait_exponential(multiplier=route.backoff_s, max=route.backoff_max_s),
            retry=tenacity.retry_if_exception(lambda exc: isinstance(exc, DeliveryFailed) and not exc.permanent),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    number = await self._attempt(row, route, attempt.retry_state.attempt_number)
                    if number is None:
                        return  # no longer ours (a retry reset it, or another sender took it over)
                    try:
                        await self.send(route, row)
                    except DeliveryFailed as exc:
                        async with self._stores.pg_conn() as conn:
                            await outbox.failed_attempt(conn, row.id, self._owner, str(exc))
                        if not exc.permanent:
                            log.warning("outbox.retry", attempt=number, max_attempts=route.max_attempts, error=str(exc), **where)
                        raise
        except DeliveryFailed as exc:
            await self._dead(row, str(exc), where, permanent=exc.permanent)
            return
        async with self._stores.pg_conn() as conn:
            await outbox.sent(conn, row.id, self._now())
        log.info("outbox.sent", kind=route.kind, **where)

    async def _attempt(self, row: outbox.Due, route: DeliveryRoute, n: int) -> int | None:
        """Count the attempt and hold the row through it and the wait after it."""
        wait_s = min(route.backoff_max_s, route.backoff_s * 2 ** (n - 1))
        until = self._now() + dt.timedelta(seconds=route.timeout_s + wait_s + LOCK_MARGIN_S)
        async with self._stores.pg_conn() as conn:
            return await outbox.attempt(conn, row.id, self._owner, until)

    async def _dead(self, row: outbox.Due, error: str, where: dict[str, object], *, permanent: bool = False) -> None:
        async with self._stores.pg_conn() as conn:
            await outbox.dead(conn, row.id, error)
        log.error("outbox.dead", error=error, permanent=permanent, **where)

    async def send(self, route: DeliveryRoute, row: outbox.Due) -> None:
        """One attempt through the route; raises DeliveryFailed."""
        if route.kind == "apprise":
            await channels.send(self._config(), route, row.payload, delivery_id=row.id)
            return
        body = body_of(row)
        if route.kind == "webhook":
            await self._webhook(route, row, body)
        elif route.kind == "file":
            assert route.path is not None
            path = self._config().config_relative(route.path)
            try:
                await asyncio.to_thread(_append, path, body)
            except OSError as exc:
                raise DeliveryFailed(f"cannot append to {path}: {exc.strerror or exc}") from None
        else:
            sys.stdout.write(body.decode() + "\n")
            sys.stdout.flush()

    async def _webhook(self, route: DeliveryRoute, row: outbox.Due, body: bytes) -> None:
        assert route.url is not None
        headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: str(row.wake_id), "X-Wake-Delivery": str(row.id)}
        if route.secret_credential is not None:
            secret = secrets.read_secret(route.secret_credential)
            if secret is None:
                raise DeliveryFailed(
                    f"credential {route.secret_credential!r} not found in $CREDENTIALS_DIRECTORY or ${secrets.env_name(route.secret_credential)}"
                )
            headers[SIGNATURE_HEADER] = signature(secret.reveal(), body)
        try:
            reply = await self._http.post(route.url, content=body, headers=headers, timeout=route.timeout_s)
        except httpx.HTTPError as exc:
            raise DeliveryFailed(logs.redact_text(f"{type(exc).__name__}: {exc}".rstrip(": "))) from None
        if not 200 <= reply.status_code < 300:
            raise DeliveryFailed(f"HTTP {reply.status_code} from {route.url}", permanent=channels.permanent_http(reply.status_code))


def _append(path: Any, body: bytes) -> None:
    with open(path, "ab") as f:
        f.write(body + b"\n")
