"""`wake trigger` and `wake status` as subprocesses against a real Redis.

No daemon runs here: the test publishes a heartbeat itself and, where a daemon would, pops the
request and reports events through `wake.control`: the real protocol, end to end.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from wake import clock, stores
from wake.config import Config
from wake.daemon import control, rendezvous
from wake.stores import lease

CLI = Callable[..., subprocess.CompletedProcess[str]]

SOLO = """
[agents.solo.tiers.whisper]
binds = ["wake.whisper"]
"""


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True, socket_timeout=5)
    yield client
    await client.aclose()


def _replica(replica_id: str, *, pid: int = 4242, running: list[dict[str, Any]] | None = None,
             next_fires: list[dict[str, Any]] | None = None) -> control.ReplicaState:
    now = clock.now()
    return control.ReplicaState(
        replica_id=replica_id, host=f"host-{replica_id}", pid=pid, version="0.1.0",
        started_at=now - dt.timedelta(hours=1), heartbeat_at=now, running=running or [], next_fires=next_fires or [],
    )


async def _cli(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "wake", *args, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def _finish(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def test_trigger_with_no_daemon_alive_says_so_and_leaves_no_request(wake_cli: CLI, write_config: Callable[..., Path], redis_url: str) -> None:
    config = write_config()
    env = {"REDIS_URL": redis_url}
    done = wake_cli("--config", str(config), "trigger", "--agent", "demo", "--tier", "surface", extra_env=env)
    assert done.returncode == 69
    assert done.stderr.strip().splitlines()[-1].startswith("wake: no wake daemon is alive: no replica heartbeat in redis at ")
    assert done.stdout == ""
    queued = wake_cli("--config", str(config), "status", "--json", extra_env=env)
    assert json.loads(queued.stdout)["pending_requests"] == 0


def test_trigger_validates_agent_and_tier_before_asking(wake_cli: CLI, write_config: Callable[..., Path], redis_url: str) -> None:
    config = write_config(SOLO)
    env = {"REDIS_URL": redis_url}
    ghost = wake_cli("--config", str(config), "trigger", "--agent", "ghost", extra_env=env)
    assert ghost.returncode == 65 and "no agent 'ghost' is configured; known: solo" in ghost.stderr
    full = wake_cli("--config", str(config), "trigger", "--agent", "solo", "--tier", "full", extra_env=env)
    assert full.returncode == 65 and "agent 'solo' has no full tier; configured: whisper" in full.stderr


async def test_trigger_prints_the_wake_id_and_waits_for_the_outcome(
    wake_cli: CLI, write_config: Callable[..., Path], redis_url: str, redis: aioredis.Redis
) -> None:
    config = write_config()
    env = {**wake_cli.env, "REDIS_URL": redis_url}  # type: ignore[attr-defined]
    await control.heartbeat(redis, _replica("r1"), ttl_s=60)

    async def serve(status: str, **extra: Any) -> tuple[control.TriggerRequest, str]:
        request = await control.next_request(redis, timeout_s=30)
        assert request is not None
        wake_id = str(uuid.uuid4())
        await control.report(redis, request.request_id, {"event": "started", "wake_id": wake_id})
        await asyncio.sleep(0.5)
        await control.report(redis, request.request_id, {"event": "settled", "wake_id": wake_id, "status": status, **extra})
        return request, wake_id

    proc = await _cli(env, "--config", str(config), "trigger", "--agent", "demo", "--tier", "full")
    request, wake_id = await serve("quiet", note="nothing changed", error=None)
    code, out, err = await _finish(proc)
    assert code == 0, err
    assert (request.agent, request.tier) == ("demo", "full")
    assert out.splitlines() == [f"wake {wake_id}", "agent demo  tier full  trigger manual  status quiet", "note: nothing changed"]

    proc = await _cli(env, "--config", str(config), "trigger", "--agent", "demo", "--json")
    request, wake_id = await serve("failed", note=None, error="model unreachable")
    code, out, err = await _finish(proc)
    assert code == 1
    outcome = json.loads(out)
    assert request.tier == "whisper"
    assert (outcome["outcome"], outcome["wake_id"], outcome["status"], outcome["error"]) == ("settled", wake_id, "failed", "model unreachable")
    assert [e["event"] for e in outcome["events"]] == ["started", "settled"]


async def test_trigger_no_wait_returns_once_started(wake_cli: CLI, write_config: Callable[..., Path], redis_url: str, redis: aioredis.Redis) -> None:
    config = write_config()
    env = {**wake_cli.env, "REDIS_URL": redis_url}  # type: ignore[attr-defined]
    await control.heartbeat(redis, _replica("r1"), ttl_s=60)
    proc = await _cli(env, "--config", str(config), "trigger", "--agent", "demo", "--no-wait")
    request = await control.next_request(redis, timeout_s=30)
    assert request is not None
    await control.report(redis, request.request_id, {"event": "started", "wake_id": "w-started"})
    code, out, err = await _finish(proc)  # returns although nothing ever settles
    assert code == 0, err
    assert out.splitlines() == ["wake w-started", "started; not waiting for the outcome (see `wake show w-started`)"]


async def test_trigger_refused_by_the_daemon(wake_cli: CLI, write_config: Callable[..., Path], redis_url: str, redis: aioredis.Redis) -> None:
    config = write_config()
    env = {**wake_cli.env, "REDIS_URL": redis_url}  # type: ignore[attr-defined]
    await control.heartbeat(redis, _replica("r1"), ttl_s=60)
    proc = await _cli(env, "--config", str(config), "trigger", "--agent", "demo")
    request = await control.next_request(redis, timeout_s=30)
    assert request is not None
    await control.report(redis, request.request_id, {"event": "refused", "reason": "draining: the daemon is stopping"})
    code, out, err = await _finish(proc)
    assert code == 1 and out == ""
    assert err.strip().splitlines()[-1] == "wake: the daemon refused the request: draining: the daemon is stopping"


def test_trigger_that_no_daemon_takes_times_out_and_is_withdrawn(
    wake_cli: CLI, write_config: Callable[..., Path], redis_url: str, redis: aioredis.Redis
) -> None:
    config = write_config()
    asyncio.run(_heartbeat_sync(redis_url))  # a replica that beats but never pops
    done = wake_cli("--config", str(config), "trigger", "--agent", "demo", "--timeout", "1", extra_env={"REDIS_URL": redis_url})
    assert done.returncode == 75
    assert done.stderr.strip().splitlines()[-1] == "wake: timed out after 1s: no daemon took the request; it was withdrawn and will not run"
    status = json.loads(wake_cli("--config", str(config), "status", "--json", extra_env={"REDIS_URL": redis_url}).stdout)
    assert status["pending_requests"] == 0


async def _heartbeat_sync(redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await control.heartbeat(client, _replica("mute"), ttl_s=60)
    await client.aclose()


async def test_status_lists_replicas_running_wakes_leases_and_next_fires(
    wake_cli: CLI, store_config: Callable[..., Config], redis: aioredis.Redis
) -> None:
    config = store_config(agents=_two_agents())
    soon = clock.now() + dt.timedelta(minutes=3)
    async with stores.connected(config, neo4j=False) as st:
        held = await lease.acquire(st, "demo", ttl_ms=30_000, owner="host-r1:4242")
        wake_id = str(uuid.uuid4())
        running = [{"agent": "demo", "tier": "full", "wake_id": wake_id, "trigger": "schedule", "started_at": clock.now(), "fence": held.fence}]
        await control.heartbeat(redis, _replica("r1", running=running, next_fires=[
            {"agent": "demo", "tier": "whisper", "at": (soon + dt.timedelta(minutes=1)).isoformat()},
            {"agent": "demo", "tier": "full", "at": (soon + dt.timedelta(hours=10)).isoformat()},
        ]), ttl_s=60)
        await control.heartbeat(redis, _replica("r2", pid=777, next_fires=[
            {"agent": "demo", "tier": "whisper", "at": soon.isoformat()},
        ]), ttl_s=60)

        env = {"WAKE_CONFIG": str(config.path)}
        done = wake_cli("status", "--json", extra_env=env)
        assert done.returncode == 0, done.stderr
        s = json.loads(done.stdout)
        assert s["daemon_alive"] is True
        assert [(r["replica_id"], r["host"], r["pid"]) for r in s["replicas"]] == [("r1", "host-r1", 4242), ("r2", "host-r2", 777)]
        assert all(0 <= r["heartbeat_age_s"] < 60 for r in s["replicas"])
        assert [(w["agent"], w["wake_id"], w["fence"], w["replica_id"]) for w in s["running"]] == [("demo", wake_id, held.fence, "r1")]
        leases = {row["agent"]: row for row in s["leases"]}
        assert leases["demo"]["held"] is True and leases["demo"]["holder"] == held.token and leases["demo"]["fence"] == held.fence
        assert 0 < leases["demo"]["ttl_s"] <= 30
        # each agent's owner: the one every replica computes from the same two heartbeats
        other_owner = rendezvous.owner_of("other", ["r1", "r2"])
        assert leases["other"] == {"agent": "other", "held": False, "holder": None, "ttl_s": None, "fence": None, "owner": other_owner}
        assert leases["demo"]["owner"] == rendezvous.owner_of("demo", ["r1", "r2"]) and other_owner in {"r1", "r2"}
        fires = {(f["agent"], f["tier"]): f["at"] for f in s["next_fires"]}
        assert fires == {
            ("demo", "whisper"): soon.isoformat(),  # the earliest across replicas
            ("demo", "surface"): None,  # no replica published one
            ("demo", "full"): (soon + dt.timedelta(hours=10)).isoformat(),
            ("other", "whisper"): None,
        }

        text = wake_cli("status", extra_env=env).stdout
        assert "replicas (2 live)" in text
        assert held.token in text and wake_id in text
        assert any(line.split()[:2] == ["demo", "whisper"] and line.split()[-3:] == ["in", "3m", "same"] for line in text.splitlines())

        await control.forget(redis, "r1")
        await control.forget(redis, "r2")
        alone = wake_cli("status", extra_env=env)
        assert alone.returncode == 0
        head = alone.stdout.splitlines()
        assert head[:2] == ["postgres: ok (reachable)", f"redis: ok ({head[1][len('redis: ok ('):-1]})"] and head[2] == ""
        assert head[3].startswith("no daemon alive (no replica heartbeat in redis at ")
        assert "next fires (from the config: no daemon alive to run them)" in alone.stdout  # computed, not "unknown"
        assert held.token in alone.stdout  # leases are still shown
        fires = json.loads(wake_cli("status", "--json", extra_env=env).stdout)["next_fires"]
        assert fires and {f["source"] for f in fires} == {"config"}
        await held.release()


def _two_agents() -> str:
    from tests.conftest import DEMO_TIERS

    return DEMO_TIERS + """
[agents.other.tiers.whisper]
binds = ["wake.whisper"]
"""


async def test_an_interrupted_trigger_withdraws_its_request(
    wake_cli: CLI, write_config: Callable[..., Path], redis_url: str, redis: aioredis.Redis
) -> None:
    config = write_config()
    env = {**wake_cli.env, "REDIS_URL": redis_url}  # type: ignore[attr-defined]
    await control.heartbeat(redis, _replica("mute"), ttl_s=60)  # alive, but never takes a request
    proc = await _cli(env, "--config", str(config), "trigger", "--agent", "demo")
    for _ in range(300):
        if await control.pending_requests(redis) == 1:
            break
        await asyncio.sleep(0.05)
    assert await control.pending_requests(redis) == 1
    proc.send_signal(signal.SIGINT)
    code, out, err = await _finish(proc)
    assert code == 130 and err.strip().splitlines()[-1] == "wake: interrupted"
    assert await control.pending_requests(redis) == 0
