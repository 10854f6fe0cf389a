"""Step 3 of a wake: one wake per agent at a time, and a fence that only grows.

The lease is the Redis key `wake:lease:<agent>` holding a random token, with a TTL. The fencing
token comes from the counter `wake:fence:<agent>`, incremented in the same Lua call that sets the
lease, so no two holders ever share a fence. The counter is seeded from PostgreSQL's newest fence
(`agent_fences`): a Redis that lost its data cannot hand out a fence that already ran.

A holder renews every TTL/3 with a compare-and-pexpire; only the holder may release (compare-and-
delete). When a renewal finds the key gone or owned by someone else, the lease is lost: `lost` is
set, `lease.lost` is logged, and the task it guards (if any) is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from ledgers import fences, introspection
from ledgers.errors import StaleFence
from wake import keys, logs
from wake.errors import LeaseBusy
from wake.observe import metrics
from wake.stores import Stores

log = logs.get("wake.lease")

LEASE_KEY = keys.LEASE
FENCE_KEY = keys.FENCE
# How often a caller willing to wait retries a busy lease.
_BUSY_POLL_S = 0.25

# KEYS: lease, fence counter. ARGV: token, ttl_ms, floor (PostgreSQL's newest fence + 1).
# Returns the new fence, or 0 when the lease is held by someone else.
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.call('INCR', KEYS[2])
  local floor = tonumber(ARGV[3])
  if fence < floor then
    redis.call('SET', KEYS[2], floor)
    fence = floor
  end
  return fence
end
return 0
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


@dataclass(kw_only=True)
class Lease:
    agent_id: str
    token: str
    fence: int
    ttl_ms: int
    redis: aioredis.Redis
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    # The rows left `started` that taking the lease closed `abandoned` (when asked to: `abandon`).
    abandoned: list[introspection.AbandonedRow] = field(default_factory=list)
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    _renewing: asyncio.Task[None] | None = field(default=None, repr=False)
    _guarded: asyncio.Task[object] | None = field(default=None, repr=False)
    _last_ok: float = field(default=0.0, repr=False)

    @property
    def key(self) -> str:
        return LEASE_KEY.format(agent=self.agent_id)

    async def renew(self) -> bool:
        ok = bool(await self.redis.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))
        if not ok and not self.lost.is_set():
            self.lost.set()
            log.warning("lease.lost", agent=self.agent_id, fence=self.fence)
            metrics.lease_lost(self.agent_id)
        return ok

    async def release(self) -> bool:
        """Compare-and-delete: True if this holder still held the lease and released it."""
        return bool(await self.redis.eval(_RELEASE, 1, self.key, self.token))

    def keep(self, guarded: asyncio.Task[object] | None = None) -> None:
        """Renew every TTL/3 until `stop_keeping`; on loss, cancel `guarded`. A Redis error counts
        as a failed renewal only once the TTL has run out since the last success. A timer, not a
        task: a wake shorter than TTL/3 (most) never renews, and its release waits for no task."""
        loop = asyncio.get_running_loop()
        self._guarded = guarded
        self._last_ok = loop.time()
        self._timer = loop.call_later(self.ttl_ms / 3000, self._due)

    def _due(self) -> None:
        self._timer = None
        self._renewing = asyncio.get_running_loop().create_task(self._renew_once(), name=f"lease-renewal:{self.agent_id}")

    async def _renew_once(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            if await self.renew():
                self._last_ok = loop.time()
        except Exception as exc:  # Redis unreachable: the lease may still be ours until the TTL runs out
            log.warning("lease.renew_failed", agent=self.agent_id, error=logs.redact_text(str(exc)))
            if loop.time() - self._last_ok >= self.ttl_ms / 1000 and not self.lost.is_set():
                self.lost.set()
                log.warning("lease.lost", agent=self.agent_id, fence=self.fence, reason="renewal failed past the TTL")
                metrics.lease_lost(self.agent_id)
        if self.lost.is_set():
            if self._guarded is not None and not self._guarded.done():
                self._guarded.cancel()
            return
        self._timer = loop.call_later(self.ttl_ms / 3000, self._due)

    async def stop_keeping(self) -> None:
        """No more renewals; a renewal under way is cancelled and waited for."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        renewing, self._renewing = self._renewing, None
        if renewing is not None and not renewing.done():
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing


async def holder(redis: aioredis.Redis, agent_id: str) -> str | None:
    value = await redis.get(LEASE_KEY.format(agent=agent_id))
    return str(value) if value is not None else None


async def acquire(
    stores: Stores, agent_id: str, *, ttl_ms: int, owner: str = "", wait_s: float = 0.0, floor: int | None = None, abandon: str | None = None,
    conn: object = None,
) -> Lease:
    """Take the agent's lease and a new fence, and record the fence in PostgreSQL.

    Raises `LeaseBusy` when the lease is still held after `wait_s` (0: one try). `owner` is a
    readable prefix of the token (host:pid) so `wake status` can say who holds it. `floor` is
    PostgreSQL's newest fence when the caller has just read it (the slot claim reads it in the
    same round trip); the first try uses it, later ones read it fresh. `conn`: record the fence on
    this connection, in the caller's open transaction (the slot claim's, so that the claim and
    the fence commit together); only with `wait_s` 0. With `abandon` (a reason),
    recording the fence also closes the agent's rows left `started` (`Lease.abandoned`): in the
    same statement when there are none, else in a fenced transaction right after that links
    each into the agent's chain (`fences.advance_seeing_started`, `introspection.abandon_started`).
    """
    if conn is not None and wait_s:
        raise ValueError("a lease taken in the caller's transaction does not wait")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        try:
            return await _acquire_once(stores, agent_id, ttl_ms=ttl_ms, owner=owner, floor=floor, abandon=abandon, conn=conn)
        except LeaseBusy:
            floor = None
            # Wait on Redis alone while the lease is visibly held; try again (PostgreSQL's fence
            # floor included, read fresh) only once it looks free.
            while loop.time() < deadline:
                await asyncio.sleep(min(_BUSY_POLL_S, max(0.0, deadline - loop.time())))
                if await holder(stores.redis, agent_id) is None:
                    break
            else:
                raise


async def _acquire_once(
    stores: Stores, agent_id: str, *, ttl_ms: int, owner: str, floor: int | None, abandon: str | None, conn: object = None,
) -> Lease:
    token = f"{owner}:{secrets.token_hex(8)}" if owner else secrets.token_hex(12)
    if floor is None:
        async with _on(stores, conn) as c:
            floor = await fences.newest(c, agent_id) or 0
    fence = int(await stores.redis.eval(_ACQUIRE, 2, LEASE_KEY.format(agent=agent_id), FENCE_KEY.format(agent=agent_id), token, ttl_ms, floor + 1))
    if fence == 0:
        raise LeaseBusy(agent_id, await holder(stores.redis, agent_id))
    lease = Lease(agent_id=agent_id, token=token, fence=fence, ttl_ms=ttl_ms, redis=stores.redis)
    try:
        async with _on(stores, conn) as c:
            if abandon is None:
                await fences.advance(c, agent_id, fence)
            else:
                _, left_started = await fences.advance_seeing_started(c, agent_id, fence)
                if left_started:  # rare (a holder died): closing them links each into the chain, under the fence
                    async with c.transaction():
                        await fences.check(c, agent_id, fence)
                        lease.abandoned = await introspection.abandon_started(c, agent_id, abandon)
    except BaseException:
        with contextlib.suppress(Exception):
            await asyncio.shield(lease.release())
        raise
    log.info("lease.acquired", agent=agent_id, fence=fence, ttl_ms=ttl_ms)
    return lease


def _on(stores: Stores, conn: object) -> contextlib.AbstractAsyncContextManager[Any]:
    """The caller's connection when it gave one, else a pooled one."""
    return contextlib.nullcontext(conn) if conn is not None else stores.pg_conn()


@contextlib.asynccontextmanager
async def held(
    stores: Stores, agent_id: str, *, ttl_ms: int, owner: str = "", guarded: asyncio.Task[object] | None = None, wait_s: float = 0.0,
    floor: int | None = None, abandon: str | None = None,
) -> AsyncIterator[Lease]:
    """Take the lease (`acquire`) and hold it for the body (`holding`)."""
    lease = await acquire(stores, agent_id, ttl_ms=ttl_ms, owner=owner, wait_s=wait_s, floor=floor, abandon=abandon)
    async with holding(lease, guarded):
        yield lease


@contextlib.asynccontextmanager
async def holding(lease: Lease, guarded: asyncio.Task[object] | None = None) -> AsyncIterator[Lease]:
    """Hold a lease just taken for the body, renewing it; release it (if still ours) on the way out."""
    lease.keep(guarded)
    try:
        yield lease
    finally:
        await lease.stop_keeping()
        with contextlib.suppress(Exception):
            await asyncio.shield(lease.release())


@contextlib.asynccontextmanager
async def fenced(stores: Stores, agent_id: str, fence: int | None, *, trusted: bool = True, scoped: bool = False) -> AsyncIterator[Any]:
    """A PostgreSQL connection in a transaction that has checked `fence` is the agent's newest.

    `fence=None` means the caller holds no lease (a dry run, a test); the transaction is then not
    fenced. A stale fence raises `StaleFence` before anything is written; it is logged
    `fence.stale`. `trusted=False` (tool code) gives the connection the pool's full reset;
    `scoped` (tool code) takes it from the tool role's pool, bound to `agent_id`.
    """
    conn_cm = stores.scoped_conn(agent_id) if scoped else stores.pg_conn(trusted=trusted)
    async with conn_cm as conn, fenced_on(conn, agent_id, fence) as c:
        yield c


@contextlib.asynccontextmanager
async def fenced_on(conn: Any, agent_id: str, fence: int | None) -> AsyncIterator[Any]:
    """`fenced` on a connection the caller holds: a transaction on it (a savepoint, in one) that
    has checked `fence` is the agent's newest."""
    async with conn.transaction():
        if fence is not None:
            try:
                await fences.check(conn, agent_id, fence)
            except StaleFence as exc:
                refused(agent_id, exc)
                raise
        yield conn


def refused(agent_id: str, exc: StaleFence) -> None:
    """A write refused for its stale fence, logged once (`fence.stale`) and counted; the caller
    re-raises. For writes that check the fence in their own statement, outside `fenced`."""
    log.warning("fence.stale", agent=agent_id, fence=exc.fence, newest=exc.newest)
    metrics.stale_fence(agent_id)
