"""The daemon's decisions over real PostgreSQL and Redis, in one process: claims, busy agents,
abandoned rows, catch-up, reload, manual triggers, a whole run with its heartbeat."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
import structlog
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ledgers import controls, introspection, slots
from ledgers.vocab import Tier, Trigger
from tests.support import agents, daemons
from wake import clock, stores
from wake.config import Config
from wake.context import WakeRequest
from wake.daemon import beat, control, jobs, notify, ownership, schedule, wakes
from wake.daemon import service as daemon
from wake.run import claim
from wake.stores import lease

AGENTS = agents.toml(tiers={
    "whisper": 'every = "15m"\nbinds = ["wake.whisper"]',
    "surface": 'every = "1h"\nbinds = ["wake.surface"]',
    "full": 'cron = "0 * * * *"\nbinds = ["wake"]',
})
DAEMON = "[daemon]\nlease_ttl_s = 5\nheartbeat_s = 0.2\nbusy_wait_s = 2\ndrain_s = 5\n"


@pytest.fixture
async def opened(store_config: Callable[..., Config]) -> AsyncIterator[Callable[..., daemon.Daemon]]:
    """Daemons sharing this test's stores, ready for `run_slot` and friends (not `run`)."""
    async with daemons.factory(store_config(DAEMON, agents=AGENTS)) as make:
        yield make


def _twenty_past() -> dt.datetime:
    """Twenty past this hour, or past the last one while this one's is still ahead."""
    now = dt.datetime.now(dt.UTC).replace(minute=20, second=0, microsecond=0)
    if now > clock.now():
        now -= dt.timedelta(hours=1)
    return now


async def _rows(d: daemon.Daemon) -> list[introspection.WakeSummary]:
    assert d.stores is not None
    async with d.stores.pg_conn() as conn:
        return await introspection.recent(conn, limit=100)


async def test_a_slot_runs_once_whoever_fires_it(opened: Callable[..., daemon.Daemon]) -> None:
    a, b, late = opened(), opened(), opened(now=lambda: clock.now() - dt.timedelta(seconds=3))
    whisper = a.schedules[("demo", "whisper")]
    slot = schedule.fire_at_or_before(whisper, clock.now())
    assert slot is not None
    with structlog.testing.capture_logs() as logs:
        await asyncio.gather(a.run_slot(whisper, slot, "schedule"), b.run_slot(whisper, slot, "schedule"))
        await late.run_slot(whisper, slot, "schedule")  # a replica whose clock is late, firing the same slot
    rows = await _rows(a)
    assert [(r.tier, r.trigger, r.scheduled_for, r.status) for r in rows] == [("whisper", "schedule", slot, "completed")]
    taken = [e for e in logs if e["event"] == "wake.skipped" and e.get("reason") == "slot_taken"]
    assert len(taken) == 2
    holder = await _slot(a, slot)
    assert holder.wake_id == rows[0].wake_id
    assert holder.claimed_by in {a.replica_id, b.replica_id}  # one of the two on time; never the late one
    assert {e["claimed_by"] for e in taken} == {holder.claimed_by}
    assert {e["wake_id"] for e in taken} == {str(rows[0].wake_id)}


async def _slot(d: daemon.Daemon, slot: dt.datetime, tier: str = "whisper") -> slots.Holder:
    assert d.stores is not None
    async with d.stores.pg_conn() as conn:
        got = await slots.holder(conn, "demo", tier, slot)
    assert got is not None
    return got


async def test_busy_agent_whisper_is_skipped_and_surface_waits(opened: Callable[..., daemon.Daemon]) -> None:
    d = opened()
    assert d.stores is not None
    other = await lease.acquire(d.stores, "demo", ttl_ms=5000, owner="someone:1")
    slot = dt.datetime(2026, 11, 29, 9, tzinfo=dt.UTC)
    await d.run_slot(d.schedules[("demo", "whisper")], slot, "schedule")
    [skipped] = await _rows(d)
    assert (skipped.status, skipped.scheduled_for, skipped.manifest_root) == ("skipped", slot, None)
    assert skipped.note == "skipped: busy: another wake of the agent holds its lease (a wake not recorded yet, held by someone:1)"

    async def release_soon() -> None:
        await asyncio.sleep(0.5)
        await other.release()

    releaser = asyncio.create_task(release_soon())
    await d.run_slot(d.schedules[("demo", "surface")], slot, "schedule")  # waits up to busy_wait_s = 2
    await releaser
    surface = [r for r in await _rows(d) if r.tier == "surface"]
    assert [r.status for r in surface] == ["completed"]


async def test_a_claimed_slot_whose_lease_cannot_be_taken_still_leaves_its_one_row(opened: Callable[..., daemon.Daemon], tmp_path: Any) -> None:
    d = opened()
    assert d.stores is not None
    real = d.stores
    # A Redis that is not there, refused at once: redis-py's default client retries a refused
    # connect 10 times with jittered backoff (up to about 4 s), which the claim's open transaction
    # would sit out; with this test's lease TTL of 5 s, PostgreSQL's idle-in-transaction timeout (the
    # TTL) then ended the claim on a loaded machine, and the slot was spooled instead of recorded.
    gone = aioredis.Redis(unix_socket_path=str(tmp_path / "no-redis.sock"), decode_responses=True, retry=Retry(NoBackoff(), 0))
    d.stores = dataclasses.replace(real, redis_client=gone)
    slot = dt.datetime(2026, 11, 29, 9, 15, tzinfo=dt.UTC)
    try:
        await d.run_slot(d.schedules[("demo", "whisper")], slot, "schedule")
    finally:
        await d.stores.redis.aclose()
        d.stores = real
    [failed] = await _rows(d)
    assert (failed.status, failed.scheduled_for, failed.manifest_root) == ("failed", slot, None)
    assert failed.error.startswith("lease not taken: ConnectionError")
    await d.run_slot(d.schedules[("demo", "whisper")], slot, "schedule")  # the slot is spent: never run again
    assert [r.wake_id for r in await _rows(d)] == [failed.wake_id]


async def test_rows_of_a_dead_holder_are_abandoned_by_the_next_lease_holder(opened: Callable[..., daemon.Daemon]) -> None:
    d = opened()
    assert d.stores is not None
    dead = introspection.WakeRow(
        wake_id=uuid.uuid4(), agent_id="demo", tier="full", trigger="manual", scheduled_for=None, started_at=clock.now(),
        manifest_root="0" * 64, host="gone", pid=1, version="0", config_hash="x", fence=1,
    )
    async with d.stores.pg_conn() as conn:
        await introspection.insert(conn, dead)
    await d._close_abandoned_at_start()
    async with d.stores.pg_conn() as conn:
        row = await introspection.get(conn, dead.wake_id)
    assert row is not None and row.status == "abandoned" and "lost the agent's lease" in row.error
    assert row.finished_at is not None


async def test_rows_of_a_pid_dead_on_this_host_are_abandoned_at_start_while_its_lease_is_still_held(
    opened: Callable[..., daemon.Daemon],
) -> None:
    d = opened()
    assert d.stores is not None
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that was alive on this host and is dead now
    mine = socket.gethostname()
    rows = {
        name: introspection.WakeRow(
            wake_id=uuid.uuid4(), agent_id="demo", tier="full", trigger="manual", scheduled_for=None, started_at=clock.now(),
            manifest_root="0" * 64, host=host, pid=pid, version="0", config_hash="x", fence=1,
        )
        for name, host, pid in (("dead_here", mine, gone.pid), ("alive_here", mine, os.getpid()), ("elsewhere", "another-host", gone.pid))
    }
    async with d.stores.pg_conn() as conn:
        for row in rows.values():
            await introspection.insert(conn, row)
    # the dead process's lease is still held (its TTL has not run out): no lease can be taken
    held = await lease.acquire(d.stores, "demo", ttl_ms=600_000, owner="the-dead-process")
    assert held.fence is not None
    await d._close_abandoned_at_start()
    async with d.stores.pg_conn() as conn:
        got = {name: await introspection.get(conn, row.wake_id) for name, row in rows.items()}
    assert got["dead_here"] is not None and got["dead_here"].status == "abandoned" and "died on this host" in got["dead_here"].error
    assert got["alive_here"] is not None and got["alive_here"].status == "started"
    assert got["elsewhere"] is not None and got["elsewhere"].status == "started"


async def test_a_slot_or_oneshot_whose_claimer_died_before_its_row_gets_one_failed_row_at_start(opened: Callable[..., daemon.Daemon]) -> None:
    """A replica killed after its claim committed and before the slot's row (a surface wake waiting
    for a busy lease), or a one-shot's, leaves a claim that no other replica may run and nothing else would record.
    A daemon starting on that host writes the slot's one row; a live claimer's claim (it may be
    suspended) and another host's are left to their owners."""
    d, again = opened(), opened()
    assert d.stores is not None
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that was alive on this host and is dead now
    mine = socket.gethostname()
    slot = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0) - dt.timedelta(hours=1)
    claims = {
        name: (tier, uuid.uuid4(), f"{host}:{pid}:0badc0de")
        for name, tier, host, pid in (
            ("dead_here", "surface", mine, gone.pid), ("alive_here", "full", mine, os.getpid()), ("elsewhere", "whisper", "another-host", gone.pid),
        )
    }
    shots = {name: (uuid.uuid4(), f"{mine}:{pid}:0badc0de") for name, pid in (("dead_here", gone.pid), ("alive_here", os.getpid()))}
    async with d.stores.pg_conn() as conn:
        for tier, wake_id, by in claims.values():
            assert await slots.claim(conn, agent_id="demo", tier=tier, scheduled_for=slot, trigger="schedule", claimed_by=by,
                                     claimed_at=slot, wake_id=wake_id)
        for wake_id, by in shots.values():  # one-shots (`wake at`), claimed the same way
            await controls.add_oneshot(conn, wake_id=wake_id, agent_id="demo", tier="full", fire_at=slot, note=None, created_by="op",
                                       created_at=slot)
            assert await controls.claim_oneshot(conn, wake_id, by, slot)
    with structlog.testing.capture_logs() as logs:
        await asyncio.gather(d._close_abandoned_at_start(), again._close_abandoned_at_start())  # two daemons starting on one host
    async with d.stores.pg_conn() as conn:
        got = {name: await introspection.get(conn, wake_id) for name, (_, wake_id, _) in claims.items()}
        shot = {name: await introspection.get(conn, wake_id) for name, (wake_id, _) in shots.items()}
        checked = introspection.walk("demo", await introspection.chain_rows(conn, "demo"), await introspection.chain_head(conn, "demo"))
    dead = got["dead_here"]
    assert dead is not None and (dead.status, dead.tier, dead.scheduled_for) == ("failed", "surface", slot)
    assert dead.error is not None and claims["dead_here"][2] in dead.error and "died after claiming the slot" in dead.error
    assert got["alive_here"] is None and got["elsewhere"] is None
    dead_shot = shot["dead_here"]
    assert dead_shot is not None and (dead_shot.status, dead_shot.trigger, dead_shot.scheduled_for) == ("failed", "at", None)
    assert dead_shot.error is not None and "died after claiming the one-shot" in dead_shot.error
    assert shot["alive_here"] is None
    written = {claims["dead_here"][1], shots["dead_here"][0]}
    assert sorted(r.wake_id for r in await _rows(d)) == sorted(written)  # one row each, though two daemons started
    assert checked.broken is None and checked.why is None and checked.rows == 2
    assert sorted(e["wake_id"] for e in logs if e["event"] == "wake.failed") == sorted(map(str, written))


async def test_a_slot_whose_fence_went_stale_before_its_row_still_gets_one_row(opened: Callable[..., daemon.Daemon]) -> None:
    """A replica suspended after its claim took the lease and before the wake's row, past the
    TTL, resumes with a stale fence: every fenced write of the wake is refused, so the wake writes
    no row. The slot still gets its one row, `aborted`, unfenced, and the chain holds."""
    d = opened()
    assert d.session is not None and d.stores is not None
    whisper = d.schedules[("demo", "whisper")]
    slot = schedule.fire_at_or_before(whisper, clock.now())
    assert slot is not None
    request = WakeRequest(agent_id="demo", tier=Tier.whisper, trigger=Trigger.schedule, scheduled_for=slot)
    st = d.stores

    with structlog.testing.capture_logs() as logs:
        async with claim.started(d.session, request, claim.Claim(by="vm:1:suspended"), owner="suspended-replica") as wake:
            assert wake is not None
            async with st.pg_conn() as conn:  # another replica takes a newer fence meanwhile
                await conn.execute("UPDATE agent_fences SET fence = fence + 1 WHERE agent_id = 'demo'")
            outcome = await claim.ran(d.session, wake)
    assert outcome is not None and not outcome.recorded
    async with st.pg_conn() as conn:
        row = await introspection.get(conn, request.wake_id)
        checked = introspection.walk("demo", await introspection.chain_rows(conn, "demo"), await introspection.chain_head(conn, "demo"))
    assert row is not None and (row.status, row.scheduled_for, row.fence) == ("aborted", slot, None)
    assert row.error is not None and "claimed, never recorded" in row.error
    assert [(r.scheduled_for, r.status) for r in await _rows(d)] == [(slot, "aborted")]
    assert checked.broken is None and checked.why is None and checked.rows == 1
    assert any(e["event"] == "fence.stale" for e in logs) and [e["wake_id"] for e in logs if e["event"] == "wake.aborted"] == [str(request.wake_id)]


async def test_restart_after_three_hours_catches_up_surface_and_full_once_and_never_whisper(opened: Callable[..., daemon.Daemon]) -> None:
    now = _twenty_past()
    d = opened(now=lambda: now)
    assert d.stores is not None
    three_hours_ago = now.replace(minute=0) - dt.timedelta(hours=3)
    async with d.stores.pg_conn() as conn:
        for tier in ("whisper", "surface", "full"):
            await slots.claim(
                conn, agent_id="demo", tier=tier, scheduled_for=three_hours_ago, trigger="schedule", claimed_by="old",
                claimed_at=three_hours_ago, wake_id=uuid.uuid4(),
            )
    with structlog.testing.capture_logs() as logs:
        await jobs.catch_up_all(d)
        await asyncio.gather(*list(d.tasks))
    rows = await _rows(d)
    assert sorted((r.tier, r.trigger, r.scheduled_for, r.status) for r in rows) == [
        ("full", "catch_up", now.replace(minute=0), "completed"),
        ("surface", "catch_up", now.replace(minute=0), "completed"),
    ]
    assert [e["tier"] for e in logs if e["event"] == "wake.catch_up_skipped"] == ["whisper"]
    # a second restart finds nothing missed: the catch-up claimed the slot
    await jobs.catch_up_all(opened(now=lambda: now + dt.timedelta(minutes=5)))
    assert len(await _rows(d)) == 2


async def test_manual_trigger_through_redis(opened: Callable[..., daemon.Daemon]) -> None:
    d = opened()
    assert d.stores is not None
    redis = d.stores.redis

    async def ask(agent: str, tier: str) -> list[dict[str, Any]]:
        req = await control.request_wake(redis, agent, tier, clock.now())
        popped = await control.next_request(redis, 1)
        assert popped == req
        await d.run_manual(popped)
        return [e async for e in control.events(redis, req.request_id, 2)]

    started, settled = await ask("demo", "surface")
    assert started["event"] == "started" and settled == {
        "event": "settled", "wake_id": started["wake_id"], "status": "completed", "note": settled["note"], "error": None,
    }
    [row] = await _rows(d)
    assert (str(row.wake_id), row.trigger, row.scheduled_for) == (started["wake_id"], "manual", None)
    [refused] = await ask("nobody", "whisper")
    assert refused["event"] == "refused" and "unknown agent 'nobody'" in refused["reason"]
    held = await lease.acquire(d.stores, "demo", ttl_ms=5000, owner="other:2")
    [busy] = await ask("demo", "full")
    assert busy["event"] == "refused" and "busy" in busy["reason"] and "other:2" in busy["reason"]
    await held.release()


async def test_reload_keeps_the_old_config_when_the_new_one_is_bad(opened: Callable[..., daemon.Daemon]) -> None:
    d = opened()
    d.scheduler.start()
    try:
        d._schedule_all()
        before = d.config
        text = before.path.read_text()
        before.path.write_text(text.replace('every = "15m"', 'every = "soon"'))
        with structlog.testing.capture_logs() as logs:
            assert await d.reload() is False
        assert d.config is before
        [failed] = [e for e in logs if e["event"] == "daemon.reload_failed"]
        assert "agents.demo.tiers.whisper.every" in failed["error"]
        before.path.write_text(text.replace('every = "15m"', 'every = "5m"'))
        assert await d.reload() is True
        assert d.schedules[("demo", "whisper")].every_s == 300
        job = d.scheduler.get_job("demo/whisper")
        assert job is not None and job.next_run_time.minute % 5 == 0 and job.next_run_time.second == 0
        assert len(d.scheduler.get_jobs()) == 3
    finally:
        d.scheduler.shutdown(wait=False)


async def test_a_running_daemon_fires_heartbeats_and_drains(store_config: Callable[..., Config]) -> None:
    config = store_config(DAEMON, agents=AGENTS.replace('every = "15m"', 'every = "1s"'))
    d = daemon.Daemon(config=config, notifier=notify.Notifier(None), handle_signals=False)
    runner = asyncio.create_task(d.run())
    async with stores.connected(config) as st:
        for _ in range(600):  # until a heartbeat and two rows exist (generous: a loaded machine is slow to start)
            live = await control.live_replicas(st.redis)
            if live and len(await _rows_of(st)) >= 2:
                break
            await asyncio.sleep(0.1)
        [replica] = live
        assert replica.replica_id == d.replica_id
        assert {(f["agent"], f["tier"]) for f in replica.next_fires} == {("demo", "whisper"), ("demo", "surface"), ("demo", "full")}
        d.request_stop()
        assert await asyncio.wait_for(runner, 60) == 0
        assert await control.live_replicas(st.redis) == []  # forgotten on a clean exit
        rows = await _rows_of(st)
    assert len(rows) >= 2 and all(r.status in ("completed", "skipped") for r in rows)
    whispers = sorted(r.scheduled_for for r in rows if r.tier == "whisper")
    assert all((b - a) == dt.timedelta(seconds=1) for a, b in zip(whispers, whispers[1:], strict=False))


async def _rows_of(st: stores.Stores) -> list[introspection.WakeSummary]:
    async with st.pg_conn() as conn:
        return await introspection.recent(conn, limit=1000)


async def test_a_spooled_slot_whose_connection_dies_under_its_write_stays_spooled_until_written(opened: Callable[..., daemon.Daemon]) -> None:
    """PostgreSQL cutting the connection in the middle of the spool's write (a restart) is an
    outage, not a bad row: the slot stays spooled and gets its one row once PostgreSQL answers."""
    d = opened()
    assert d.stores is not None
    slot = dt.datetime(2026, 11, 29, 9, 15, tzinfo=dt.UTC)
    d.spool.keep(WakeRequest(agent_id="demo", tier=Tier.whisper, trigger=Trigger.schedule, scheduled_for=slot), "postgres unreachable")
    async with d.stores.pg_conn() as conn:  # the claim's insert kills its own backend, as a restart would
        await conn.execute("CREATE FUNCTION test_cut() RETURNS trigger LANGUAGE plpgsql AS "
                           "$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(30); RETURN NEW; END $$")
        await conn.execute("CREATE TRIGGER test_cut BEFORE INSERT ON wake_slots FOR EACH ROW EXECUTE FUNCTION test_cut()")
    assert await d.spool.flush(d.session) == 1
    assert [m.request.scheduled_for for m in d.spool] == [slot]
    async with d.stores.pg_conn() as conn:
        await conn.execute("DROP TRIGGER test_cut ON wake_slots")
    assert await d.spool.flush(d.session) == 0
    [row] = await _rows(d)
    assert (row.status, row.scheduled_for) == ("missed", slot)


async def test_a_replica_alone_at_its_first_read_after_a_redis_outage_records_the_slots_nobody_ran(
    opened: Callable[..., daemon.Daemon], redis_url: str,
) -> None:
    """The others' heartbeats expired while Redis was away and this new replica beat first: it reads
    itself alone, but the cluster's mark names a replica that was a member, so it takes the agents
    over (each slot since the last claim gets its row) instead of starting the cluster (whose
    catch-up skips a whisper's missed slots and records none)."""
    now = _twenty_past()
    hour = now.replace(minute=0)
    d = opened(now=lambda: now)
    assert d.stores is not None and d.shared
    async with d.stores.pg_conn() as conn:
        await slots.claim(conn, agent_id="demo", tier="whisper", scheduled_for=hour - dt.timedelta(hours=1), trigger="schedule",
                          claimed_by="vm:1:gone", claimed_at=hour - dt.timedelta(hours=1), wake_id=uuid.uuid4())
    await d.stores.redis.set("wake:cluster", "vm:1:gone")
    with structlog.testing.capture_logs() as logs:
        await beat.beat(d)
        while d.tasks:
            await asyncio.wait_for(asyncio.gather(*list(d.tasks)), timeout=120)
    assert [e["why"] for e in logs if e["event"] == "wake.handover"] == ["resumed"]
    assert not [e for e in logs if e["event"] == "wake.catch_up_skipped"]
    rows = {(r.tier, r.scheduled_for): r.status for r in await _rows(d)}
    assert {k: v for k, v in rows.items() if v == "missed"} == {("whisper", hour - dt.timedelta(minutes=m)): "missed" for m in (45, 30, 15, 0)}
    assert rows[("whisper", hour - dt.timedelta(hours=1))] == "failed"  # claimed, never written: its claimer is gone
    assert set(rows) == {("whisper", hour - dt.timedelta(minutes=m)) for m in (60, 45, 30, 15, 0)} | {("whisper", hour + dt.timedelta(minutes=15))}
    assert await d.stores.redis.get("wake:cluster") in (d.replica_id, d.replica_id.encode())


async def test_a_takeover_records_a_slot_its_dead_owner_held_after_claiming_a_later_one(opened: Callable[..., daemon.Daemon]) -> None:
    """The owner spooled a slot (PostgreSQL away), claimed the next ones once it answered, and died
    (kill -9) before its spool was written: the newest claim is no watermark, the takeover finds
    the slot nobody claimed and records it, beside the slots since the last claim."""
    now = _twenty_past()
    hour = now.replace(minute=0)
    d = opened(now=lambda: now)
    assert d.stores is not None
    async with d.stores.pg_conn() as conn:
        for m in (60, 30, 15):  # 45 minutes before the hour: in the dead owner's spool
            at = hour - dt.timedelta(minutes=m)
            await slots.claim(conn, agent_id="demo", tier="whisper", scheduled_for=at, trigger="schedule", claimed_by="vm:1:gone",
                              claimed_at=at, wake_id=uuid.uuid4())
    gone = ownership.Handover(agents=("demo",), from_replica="vm:1:gone", to_replica=d.replica_id, why="expired")
    d._apply(ownership.Change(gained=[gone]))
    while d.tasks:
        await asyncio.wait_for(asyncio.gather(*list(d.tasks)), timeout=120)
    rows = {(r.tier, r.scheduled_for): r.status for r in await _rows(d)}
    assert {k for k, v in rows.items() if v == "missed"} == {("whisper", hour - dt.timedelta(minutes=45)), ("whisper", hour)}
    # the claims it made (rows never written here: the test seeds claims only) get theirs, failed
    assert {k for k, v in rows.items() if v == "failed"} == {("whisper", hour - dt.timedelta(minutes=m)) for m in (60, 30, 15)}
    assert ("whisper", hour + dt.timedelta(minutes=15)) in rows and len(rows) == 6


async def test_a_takeover_writes_the_row_of_a_slot_its_dead_owner_claimed_and_died_before_writing(opened: Callable[..., daemon.Daemon]) -> None:
    """kill -9 between a slot's claim (with the lease's fence, one commit) and the wake's first row:
    the slot is spent and nobody would ever write its row. The takeover finds the claim without a
    row, its claimer gone from the membership, and writes the slot's one row under its wake id."""
    now = _twenty_past()
    hour = now.replace(minute=0)
    d = opened(now=lambda: now)
    assert d.stores is not None
    orphan = uuid.uuid4()
    async with d.stores.pg_conn() as conn:
        await slots.claim(conn, agent_id="demo", tier="whisper", scheduled_for=hour, trigger="schedule", claimed_by="vm:1:gone",
                          claimed_at=hour, wake_id=orphan)
        await slots.claim(conn, agent_id="demo", tier="whisper", scheduled_for=hour + dt.timedelta(minutes=15), trigger="schedule",
                          claimed_by=d.replica_id, claimed_at=now, wake_id=uuid.uuid4())  # this replica's own, its wake running: left alone
    gone = ownership.Handover(agents=("demo",), from_replica="vm:1:gone", to_replica=d.replica_id, why="expired")
    d.ownership.members = (d.replica_id,)
    d._apply(ownership.Change(gained=[gone]))
    while d.tasks:
        await asyncio.wait_for(asyncio.gather(*list(d.tasks)), timeout=120)
    [row] = await _rows(d)
    assert (row.wake_id, row.scheduled_for, row.status) == (orphan, hour, "failed")
    assert row.error.startswith("claimed by vm:1:gone, which died between the claim and the wake's row")


async def test_a_slot_whose_claim_fails_in_an_unforeseen_way_still_gets_its_one_row(
    opened: Callable[..., daemon.Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """asyncpg raised what nobody listed (a connection left mid-operation by a cut link): the fired
    slot is spooled, not dropped with the task, and gets its one row through the claim."""
    import asyncpg

    d = opened()
    slot = dt.datetime(2026, 11, 29, 9, 15, tzinfo=dt.UTC)

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress")

    monkeypatch.setattr(wakes, "leased", broken)  # the exact fault, at the claim
    await d.run_slot(d.schedules[("demo", "whisper")], slot, Trigger.schedule)
    assert [m.request.scheduled_for for m in d.spool] == [slot]
    assert await d.spool.flush(d.session) == 0
    [row] = await _rows(d)
    assert (row.status, row.scheduled_for) == ("missed", slot)


async def test_many_agents_gained_at_once_get_their_jobs_a_chunk_at_a_time_and_a_lost_one_gets_none(
    store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A membership change that hands a replica thousands of agents adds their APScheduler jobs a
    chunk at a time with the loop free between chunks (at 20,000 agents one synchronous pass held
    the loop, heartbeats included, for seconds); an agent lost again before its chunk gets no job."""
    monkeypatch.setattr(jobs, "ADD_CHUNK", 3)
    names = [f"a{n:02d}" for n in range(10)]
    many = "".join(f'[agents.{a}]\ntimezone = "UTC"\n[agents.{a}.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\n' for a in names)
    async with daemons.factory(store_config(DAEMON, agents=many)) as make:
        d = make()
        d.shared = True
        d.live.scheduler.start(paused=True)
        try:
            d.ownership.owned = frozenset(names) - {"a08"}  # a08 is lost again before its chunk
            d.ownership.members = (d.replica_id,)
            seen: list[int] = []
            d._apply(ownership.Change(gained=[ownership.Handover(agents=tuple(names), from_replica=None, to_replica=d.replica_id, why="joined")]))
            assert d.triggers == {}  # nothing added in the change's own turn of the loop
            for _ in range(1000):
                if not any(t.get_name().startswith("add-jobs:") for t in d.tasks):
                    break
                seen.append(len(d.triggers))
                await asyncio.sleep(0)
            while d.tasks:
                await asyncio.wait_for(asyncio.gather(*list(d.tasks)), timeout=120)
            assert {0, 3} <= set(seen) and len(set(seen)) >= 3, seen  # other tasks ran between the chunks
            assert set(d.triggers) == {(a, "whisper") for a in names if a != "a08"}
            assert {j.id for j in d.live.scheduler.get_jobs()} == {f"{a}/whisper" for a in names if a != "a08"}
        finally:
            d.live.scheduler.shutdown(wait=False)
