"""The control protocol between running daemons and operator commands, over Redis.

Three conversations, every key named below (and nowhere else):

- **Heartbeats.** Each daemon replica writes its state as JSON to `wake:replica:<id>` with a TTL
  (`heartbeat`); a replica that stops beating disappears by itself. `live_replicas` SCANs them.
- **Triggers.** `wake trigger` pushes a request onto the list `wake:triggers` (`request_wake`); a
  daemon takes it with a blocking move (`next_request`) onto its own list of taken requests,
  `wake:triggers:taken:<replica id>`, so exactly one replica gets each request, and drops it from
  there once the request is seen through (`done`). A request's wake id is chosen with it (its
  request id), so a replica that dies after the move leaves a request another replica can give
  its one row (`failed`, `wake.daemon.dead_claimers`; `taken_lists`, `take_over`) and answer. The
  wake itself is not run again: delivery stays at most once. A client that gives up before any
  daemon took its request takes it back (`withdraw`), so nothing runs after the operator was
  told it did not.
- **Events.** The daemon that took a request reports what became of it onto the list
  `wake:trigger:<request_id>:events` (`report`), which expires on its own; the client pops them
  (`events`) until the request is settled or refused.

Blocking pops are issued in short slices, each well under the client's socket timeout
(`redis.socket_timeout_s`): a pop longer than the socket timeout would fail with a timeout error
although nothing is wrong.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import secrets
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from wake import keys, logs

log = logs.get("wake.control")

# -- every Redis key of the protocol ---------------------------------------------------------------
REPLICA_KEY = keys.REPLICA
REPLICA_MATCH = keys.REPLICA_MATCH
TRIGGER_QUEUE = keys.TRIGGERS
TAKEN_KEY = keys.TRIGGERS_TAKEN
TAKEN_MATCH = keys.TRIGGERS_TAKEN_MATCH
EVENTS_KEY = keys.TRIGGER_EVENTS

# An events list outlives any sensible client wait, then goes away by itself.
EVENTS_TTL_S = 3600
# The longest single blocking pop; loops of these make up a longer wait.
MAX_POP_SLICE_S = 1.0
# Events after which nothing more comes for a request.
FINAL_EVENTS = frozenset({"settled", "refused"})


def _iso(value: dt.datetime) -> str:
    return value.isoformat()


def _json_default(value: object) -> object:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"cannot encode {type(value).__name__} in a control message")


def _dumps(payload: object) -> str:
    return json.dumps(payload, default=_json_default, separators=(",", ":"), sort_keys=True)


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


@dataclass(frozen=True, kw_only=True)
class ReplicaState:
    """What one daemon replica publishes about itself.

    `running`: `{agent, tier, wake_id, trigger, started_at, fence}` per wake in progress;
    `next_fires`: `{agent, tier, at}` per scheduled job, `at` an ISO 8601 string. Datetimes inside
    these dicts are sent as ISO strings and come back as strings.
    """

    replica_id: str
    host: str
    pid: int
    version: str
    started_at: dt.datetime
    heartbeat_at: dt.datetime
    running: list[dict[str, object]] = field(default_factory=list)
    next_fires: list[dict[str, object]] = field(default_factory=list)
    owned: int = 0  # agents this replica schedules (wake.daemon.ownership)
    leaving: bool = False  # stopping: no longer a member, its agents are handed over
    down: dict[str, Any] = field(default_factory=dict)  # side tasks waiting out a restart's backoff (wake.daemon.supervise)

    def to_json(self) -> str:
        return _dumps({
            "replica_id": self.replica_id, "host": self.host, "pid": self.pid, "version": self.version,
            "started_at": _iso(self.started_at), "heartbeat_at": _iso(self.heartbeat_at),
            "running": self.running, "next_fires": self.next_fires, "owned": self.owned, "leaving": self.leaving,
            "down": self.down,
        })

    @classmethod
    def from_json(cls, text: str) -> ReplicaState:
        raw = json.loads(text)
        return cls(
            replica_id=str(raw["replica_id"]), host=str(raw["host"]), pid=int(raw["pid"]), version=str(raw["version"]),
            started_at=dt.datetime.fromisoformat(raw["started_at"]),
            heartbeat_at=dt.datetime.fromisoformat(raw["heartbeat_at"]),
            running=list(raw.get("running") or []), next_fires=list(raw.get("next_fires") or []),
            owned=int(raw.get("owned") or 0), leaving=bool(raw.get("leaving")), down=dict(raw.get("down") or {}),
        )


def new_replica_id() -> str:
    """A readable, unique replica id: `host:pid:random`."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


async def heartbeat(redis: aioredis.Redis, state: ReplicaState, ttl_s: float) -> None:
    """Publish the replica's state; it vanishes `ttl_s` after the last heartbeat."""
    await redis.set(REPLICA_KEY.format(replica_id=state.replica_id), state.to_json(), px=max(1, int(ttl_s * 1000)))


async def forget(redis: aioredis.Redis, replica_id: str) -> None:
    """Remove a replica's heartbeat now (a clean shutdown), rather than when it expires."""
    await redis.delete(REPLICA_KEY.format(replica_id=replica_id))


async def live_replicas(redis: aioredis.Redis) -> list[ReplicaState]:
    """Every replica whose heartbeat has not expired, ordered by id. Unreadable entries are skipped."""
    keys = [key async for key in redis.scan_iter(match=REPLICA_MATCH, count=100)]
    if not keys:
        return []
    replicas: list[ReplicaState] = []
    for key, value in zip(keys, await redis.mget(keys), strict=True):
        if value is None:  # expired between SCAN and MGET
            continue
        try:
            replicas.append(ReplicaState.from_json(_text(value)))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("control.replica_unreadable", key=_text(key), error=str(exc))
    return sorted(replicas, key=lambda r: r.replica_id)


@dataclass(frozen=True, kw_only=True)
class TriggerRequest:
    """An operator's request that some daemon run one manual wake now."""

    request_id: str
    agent: str
    tier: str
    requested_at: dt.datetime

    def to_json(self) -> str:
        return _dumps({"request_id": self.request_id, "agent": self.agent, "tier": self.tier, "requested_at": _iso(self.requested_at)})

    @classmethod
    def from_json(cls, text: str) -> TriggerRequest:
        raw = json.loads(text)
        return cls(
            request_id=str(raw["request_id"]), agent=str(raw["agent"]), tier=str(raw["tier"]),
            requested_at=dt.datetime.fromisoformat(raw["requested_at"]),
        )

    @property
    def wake_id(self) -> uuid.UUID:
        """The id of the wake this request runs, chosen with the request (its id is a UUID's hex),
        so the replica that takes it and any replica closing it after that one died agree on it."""
        try:
            return uuid.UUID(hex=self.request_id)
        except ValueError:  # not one `request_wake` made: still one id per request
            return uuid.uuid5(uuid.NAMESPACE_URL, f"wake:trigger:{self.request_id}")


async def request_wake(redis: aioredis.Redis, agent: str, tier: str, now: dt.datetime) -> TriggerRequest:
    """Client side: queue a request for a manual wake; some daemon will pop it."""
    request = TriggerRequest(request_id=uuid.uuid4().hex, agent=agent, tier=tier, requested_at=now)
    await redis.lpush(TRIGGER_QUEUE, request.to_json())
    return request


async def withdraw(redis: aioredis.Redis, request: TriggerRequest) -> bool:
    """Client side: take a request back if no daemon has popped it yet. True if it was withdrawn."""
    return bool(await redis.lrem(TRIGGER_QUEUE, 1, request.to_json()))


async def pending_requests(redis: aioredis.Redis) -> int:
    """How many requests wait in the queue (no daemon has taken them)."""
    return int(await redis.llen(TRIGGER_QUEUE))


def _pop_slice_s(redis: aioredis.Redis) -> float:
    """The longest blocking pop this client can make without its socket timing out first."""
    socket_timeout = redis.connection_pool.connection_kwargs.get("socket_timeout")
    if not socket_timeout:
        return MAX_POP_SLICE_S
    return max(0.01, min(MAX_POP_SLICE_S, float(socket_timeout) / 2))


def _pop(redis: aioredis.Redis, key: str, wait_s: float | None, *, right: bool, into: str | None) -> Any:
    """One pop from `key` (blocking `wait_s`, or not at all for None); with `into`, moved onto the
    head of that list in the same command."""
    side = "RIGHT" if right else "LEFT"
    if into is not None:
        return redis.lmove(key, into, side, "LEFT") if wait_s is None else redis.blmove(key, into, wait_s, side, "LEFT")  # type: ignore[arg-type]
    if wait_s is None:
        return redis.rpop(key) if right else redis.lpop(key)
    return redis.brpop([key], timeout=wait_s) if right else redis.blpop([key], timeout=wait_s)


async def _blocking_pop(redis: aioredis.Redis, key: str, timeout_s: float, *, right: bool, into: str | None = None) -> str | None:
    """BLPOP/BRPOP (BLMOVE `into`) one value from `key`, waiting up to `timeout_s` in slices;
    `timeout_s <= 0` polls once."""
    if timeout_s <= 0:
        value: str | bytes | None = await _pop(redis, key, None, right=right, into=into)
        return _text(value) if value is not None else None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    slice_s = _pop_slice_s(redis)
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return None
        # Redis reads a timeout of 0 as "forever"; never send one.
        wait_s = round(max(0.01, min(slice_s, remaining)), 3)
        popped = await _pop(redis, key, wait_s, right=right, into=into)
        if popped is not None:
            return _text(popped if into is not None else popped[1])


async def next_request(redis: aioredis.Redis, timeout_s: float, *, taken_by: str | None = None) -> TriggerRequest | None:
    """Daemon side: take the oldest queued request, waiting up to `timeout_s`; None when none came.

    The pop is atomic, so of several replicas waiting exactly one gets each request. With
    `taken_by` (the replica's id) the request is moved onto that replica's taken list in the same
    command, until `done`. A malformed entry is dropped and logged (it can never become valid).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    into = TAKEN_KEY.format(replica_id=taken_by) if taken_by is not None else None
    while True:
        text = await _blocking_pop(redis, TRIGGER_QUEUE, max(0.0, deadline - loop.time()), right=True, into=into)
        if text is None:
            return None
        try:
            return TriggerRequest.from_json(text)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("control.request_malformed", entry=text[:200], error=str(exc))
            if into is not None:
                await redis.lrem(into, 1, text)
            if loop.time() >= deadline:
                return None


async def done(redis: aioredis.Redis, taken_by: str, request: TriggerRequest) -> None:
    """Daemon side: the request is seen through (its wake settled, or it was refused)."""
    await redis.lrem(TAKEN_KEY.format(replica_id=taken_by), 1, request.to_json())


async def taken_lists(redis: aioredis.Redis) -> list[str]:
    """The replica ids that hold taken requests not yet seen through."""
    prefix = TAKEN_KEY.format(replica_id="")
    return sorted({_text(key).removeprefix(prefix) async for key in redis.scan_iter(match=TAKEN_MATCH)})


async def take_over(redis: aioredis.Redis, dead: str, by: str) -> TriggerRequest | None:
    """Move one request a dead replica took onto `by`'s taken list (atomic: of several replicas
    doing this, each request goes to one), or None when it holds no more."""
    while (text := await _blocking_pop(redis, TAKEN_KEY.format(replica_id=dead), 0, right=True, into=TAKEN_KEY.format(replica_id=by))) is not None:
        try:
            return TriggerRequest.from_json(text)
        except (ValueError, KeyError, TypeError):
            await redis.lrem(TAKEN_KEY.format(replica_id=by), 1, text)
    return None


async def report(redis: aioredis.Redis, request_id: str, event: dict[str, Any]) -> None:
    """Daemon side: tell the requesting client what became of its request.

    Events: `{"event": "started", "wake_id"}`, `{"event": "settled", "wake_id", "status", "note",
    "error"}`, `{"event": "refused", "reason"}`. The list expires after `EVENTS_TTL_S`, read or not.
    """
    if "event" not in event:
        raise ValueError(f"a control event needs an 'event' key, got {sorted(event)}")
    key = EVENTS_KEY.format(request_id=request_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(key, _dumps(event))
        pipe.expire(key, EVENTS_TTL_S)
        await pipe.execute()


async def events(redis: aioredis.Redis, request_id: str, timeout_s: float) -> AsyncIterator[dict[str, Any]]:
    """Client side: the events reported for a request, in order, until it is settled or refused or
    `timeout_s` (for the whole wait) has passed. The caller tells a timeout by the missing final event."""
    key = EVENTS_KEY.format(request_id=request_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        text = await _blocking_pop(redis, key, remaining, right=False)
        if text is None:
            return
        try:
            event = json.loads(text)
        except ValueError:
            log.warning("control.event_malformed", request_id=request_id, entry=text[:200])
            continue
        yield event
        if event.get("event") in FINAL_EVENTS:
            return
