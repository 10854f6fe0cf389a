"""The control protocol over a real Redis: heartbeats, trigger requests, events."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from wake.daemon import control

T0 = dt.datetime(2026, 7, 16, 9, 30, tzinfo=dt.UTC)
# Shorter than every wait below: the protocol must slice its blocking pops under it.
SOCKET_TIMEOUT_S = 0.4


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client configured like `wake.stores.open_redis` (decoded strings, a socket timeout)."""
    redis = aioredis.Redis.from_url(redis_url, decode_responses=True, socket_timeout=SOCKET_TIMEOUT_S)
    yield redis
    await redis.aclose()


@pytest.fixture
async def other_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.Redis.from_url(redis_url, decode_responses=True, socket_timeout=SOCKET_TIMEOUT_S)
    yield redis
    await redis.aclose()


def _state(replica_id: str, **changes: object) -> control.ReplicaState:
    fields: dict[str, object] = {
        "replica_id": replica_id, "host": "box", "pid": 4242, "version": "0.1.0", "started_at": T0,
        "heartbeat_at": T0 + dt.timedelta(seconds=5),
        "running": [{"agent": "demo", "tier": "full", "wake_id": "w-1", "trigger": "schedule", "started_at": T0, "fence": 7}],
        "next_fires": [{"agent": "demo", "tier": "whisper", "at": (T0 + dt.timedelta(minutes=15)).isoformat()}],
    }
    fields.update(changes)
    return control.ReplicaState(**fields)  # type: ignore[arg-type]


async def test_two_consumers_never_both_get_one_request(client: aioredis.Redis, other_client: aioredis.Redis, redis_url: str) -> None:
    got: dict[str, list[str]] = {"a": [], "b": []}

    async def consume(name: str, redis: aioredis.Redis) -> None:
        # until all 60 are taken (a loaded machine may pause the producer longer than any short pop timeout)
        while len(got["a"]) + len(got["b"]) < 60:
            if (request := await control.next_request(redis, timeout_s=0.5)) is not None:
                got[name].append(request.request_id)

    consumers = [asyncio.create_task(consume("a", client)), asyncio.create_task(consume("b", other_client))]
    await asyncio.sleep(0.1)  # both are blocked in their pops before anything arrives
    producer = aioredis.Redis.from_url(redis_url, decode_responses=True)
    sent = []
    for i in range(60):
        sent.append((await control.request_wake(producer, "demo", "whisper", T0 + dt.timedelta(seconds=i))).request_id)
        if i % 10 == 0:
            await asyncio.sleep(0.02)
    await producer.aclose()
    await asyncio.wait_for(asyncio.gather(*consumers), timeout=60)
    assert not set(got["a"]) & set(got["b"])
    assert sorted(got["a"] + got["b"]) == sorted(sent)
    assert len(got["a"] + got["b"]) == 60
    assert await control.pending_requests(client) == 0


async def test_requests_come_out_oldest_first_and_round_trip(client: aioredis.Redis) -> None:
    first = await control.request_wake(client, "demo", "whisper", T0)
    second = await control.request_wake(client, "demo", "full", T0 + dt.timedelta(seconds=1))
    assert await control.pending_requests(client) == 2
    assert await control.next_request(client, timeout_s=1) == first
    assert await control.next_request(client, timeout_s=1) == second
    assert (await control.next_request(client, timeout_s=0)) is None


async def test_a_wait_longer_than_the_socket_timeout_neither_fails_nor_misses(client: aioredis.Redis, other_client: aioredis.Redis) -> None:
    started = time.monotonic()
    assert await control.next_request(client, timeout_s=3 * SOCKET_TIMEOUT_S) is None
    assert time.monotonic() - started >= 3 * SOCKET_TIMEOUT_S - 0.05

    async def late_request() -> control.TriggerRequest:
        await asyncio.sleep(2 * SOCKET_TIMEOUT_S)
        return await control.request_wake(other_client, "demo", "surface", T0)

    sender = asyncio.create_task(late_request())
    received = await control.next_request(client, timeout_s=5)
    assert received == await sender


async def test_a_withdrawn_request_reaches_no_daemon(client: aioredis.Redis) -> None:
    request = await control.request_wake(client, "demo", "whisper", T0)
    assert await control.withdraw(client, request) is True
    assert await control.pending_requests(client) == 0
    assert await control.next_request(client, timeout_s=0.2) is None

    taken = await control.request_wake(client, "demo", "whisper", T0)
    assert await control.next_request(client, timeout_s=1) == taken
    assert await control.withdraw(client, taken) is False  # too late: a daemon has it


async def test_a_malformed_queue_entry_is_dropped_and_the_next_one_served(client: aioredis.Redis) -> None:
    await client.lpush(control.TRIGGER_QUEUE, "{not json")
    good = await control.request_wake(client, "demo", "whisper", T0)
    assert await control.next_request(client, timeout_s=1) == good
    assert await control.pending_requests(client) == 0


async def test_events_round_trip_until_settled(client: aioredis.Redis, other_client: aioredis.Redis) -> None:
    request = await control.request_wake(client, "demo", "whisper", T0)
    taken = await control.next_request(other_client, timeout_s=1)
    assert taken is not None

    async def daemon() -> None:
        await control.report(other_client, taken.request_id, {"event": "started", "wake_id": "w-9"})
        await asyncio.sleep(2 * SOCKET_TIMEOUT_S)  # a wake that outlasts a socket timeout
        await control.report(
            other_client, taken.request_id, {"event": "settled", "wake_id": "w-9", "status": "quiet", "note": "nothing changed", "error": None},
        )
        await control.report(other_client, taken.request_id, {"event": "after-the-end"})

    reporter = asyncio.create_task(daemon())
    seen = [e async for e in control.events(client, request.request_id, timeout_s=5)]
    await reporter
    assert seen == [
        {"event": "started", "wake_id": "w-9"},
        {"event": "settled", "wake_id": "w-9", "status": "quiet", "note": "nothing changed", "error": None},
    ]
    key = control.EVENTS_KEY.format(request_id=request.request_id)
    assert 0 < await client.ttl(key) <= control.EVENTS_TTL_S  # the leftover expires by itself


async def test_refused_ends_the_events_and_silence_times_out(client: aioredis.Redis) -> None:
    await control.report(client, "r-1", {"event": "refused", "reason": "draining"})
    assert [e async for e in control.events(client, "r-1", timeout_s=2)] == [{"event": "refused", "reason": "draining"}]

    started = time.monotonic()
    assert [e async for e in control.events(client, "r-2", timeout_s=0.5)] == []
    assert 0.45 <= time.monotonic() - started < 30  # the timeout is honoured; the upper bound only says it ends

    with pytest.raises(ValueError, match="'event' key"):
        await control.report(client, "r-3", {"wake_id": "w"})


async def test_heartbeats_round_trip_and_expire(client: aioredis.Redis) -> None:
    lasting, fleeting = _state("a-replica"), _state("b-replica", pid=99, running=[])
    await control.heartbeat(client, lasting, ttl_s=30)
    await control.heartbeat(client, fleeting, ttl_s=3)
    assert await control.live_replicas(client) == [
        _state("a-replica", running=[{**lasting.running[0], "started_at": T0.isoformat()}]),  # datetimes travel as ISO strings
        fleeting,
    ]
    deadline = time.monotonic() + 30
    while (live := [r.replica_id for r in await control.live_replicas(client)]) != ["a-replica"] and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert live == ["a-replica"]  # the fleeting one expired by its TTL; the lasting one did not
    await control.forget(client, "a-replica")
    assert await control.live_replicas(client) == []


async def test_an_unreadable_heartbeat_is_skipped(client: aioredis.Redis) -> None:
    await client.set(control.REPLICA_KEY.format(replica_id="junk"), "not json", px=5000)
    await control.heartbeat(client, _state("good", running=[]), ttl_s=5)
    assert [r.replica_id for r in await control.live_replicas(client)] == ["good"]
