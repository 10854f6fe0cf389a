"""A one-shot (`wake at`) or a `wake trigger` request taken by a process that dies before its row
still gets its one row, `failed` (claimed, never run): from the daemon that starts next on the
same host (the claimer's pid is dead: `unrun.dead_claims`), or from any replica once a
claimer elsewhere has stopped beating (`wake.run.unrun`, `wake.daemon.dead_claimers`). The claimers here are real processes on the real
claim path, stalled at a scripted point and killed with SIGKILL."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
import structlog

from ledgers import controls, introspection
from ledgers.vocab import Tier, Trigger
from tests.support import agents, daemons, sessions
from tests.support.daemon_proc import REPO
from wake import clock
from wake.config import Config
from wake.context import WakeRequest
from wake.daemon import control
from wake.daemon import service as daemon
from wake.run import unrun

AGENTS = agents.toml(tiers={"whisper": 'every = "15m"\nbinds = ["wake.whisper"]'})
DAEMON = "[daemon]\nlease_ttl_s = 30\nheartbeat_s = 0.5\n"

# A real claimer: the claim path of `wake at` (`claim.run` with the replica's claim), stalled at
# the step after the claim (`held_back`), where the test kills it with SIGKILL.
CLAIMER = textwrap.dedent("""
    import asyncio, sys, uuid
    from pathlib import Path
    from ledgers.vocab import Tier, Trigger
    from wake import config as wake_config, stores
    from wake.context import WakeRequest
    from wake.daemon import control
    from wake.run import claim, session

    async def stall(*args, **kwargs):
        print("@@ claimed", flush=True)
        await asyncio.Event().wait()

    async def main(path, wake_id):
        config = wake_config.load_config_file(Path(path), environ={})
        async with stores.connected(config) as st:
            s = session.Session(config=config, stores=st, registry=session.build_registry(config))
            claim.held_back = stall
            request = WakeRequest(agent_id="demo", tier=Tier.whisper, trigger=Trigger.at, wake_id=uuid.UUID(wake_id))
            await claim.run(s, request, owner=claim.owner(), claim=claim.Claim(by=control.new_replica_id()))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
""")


# A real daemon replica taking `wake trigger` requests (its trigger loop), its wake stalled once
# leased and reported started (`cycle.run_wake`), before the wake has a row.
TAKER = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from wake import config as wake_config, stores
    from wake.daemon import notify, service
    from wake.run import cycle, session

    async def stall(*args, **kwargs):
        print("@@ running", flush=True)
        await asyncio.Event().wait()

    async def main(path):
        config = wake_config.load_config_file(Path(path), environ={})
        async with stores.connected(config) as st:
            d = service.Daemon(config=config, notifier=notify.Notifier(None), handle_signals=False)
            d.open(session.Session(config=config, stores=st, registry=session.build_registry(config)))
            cycle.run_wake = stall
            print("@@", d.replica_id, flush=True)
            await d._trigger_loop()

    asyncio.run(main(sys.argv[1]))
""")


async def _child(script: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, *args, cwd=REPO, stdout=asyncio.subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )


async def _line(child: asyncio.subprocess.Process) -> str:
    """The child's next `@@ ` line (its log lines, on the same stdout, are passed over)."""
    assert child.stdout is not None

    async def marked() -> str:
        while line := (await child.stdout.readline()).decode():  # type: ignore[union-attr]
            if line.startswith("@@ "):
                return line.removeprefix("@@ ").strip()
        return "(the child's output ended)"

    return await asyncio.wait_for(marked(), timeout=120)


@pytest.fixture
async def opened(store_config: Callable[..., Config]) -> AsyncIterator[Callable[..., daemon.Daemon]]:
    async with daemons.factory(store_config(DAEMON, agents=AGENTS)) as make:
        yield make


async def _add(d: daemon.Daemon, *, claimed_by: str | None = None, claimed_at: dt.datetime | None = None) -> uuid.UUID:
    assert d.stores is not None
    wake_id, now = uuid.uuid4(), clock.now()
    async with d.stores.pg_conn() as conn:
        await controls.add_oneshot(
            conn, wake_id=wake_id, agent_id="demo", tier="whisper", fire_at=now, note=None, created_by="test", created_at=now,
        )
        if claimed_by is not None:
            assert await controls.claim_oneshot(conn, wake_id, claimed_by, claimed_at or now)
    return wake_id


async def _row(d: daemon.Daemon, wake_id: uuid.UUID) -> introspection.WakeRecord | None:
    assert d.stores is not None
    async with d.stores.pg_conn() as conn:
        return await introspection.get(conn, wake_id)


async def _chain_intact(d: daemon.Daemon) -> bool:
    assert d.stores is not None
    async with d.stores.pg_conn() as conn:
        walked = introspection.walk("demo", await introspection.chain_rows(conn, "demo"), await introspection.chain_head(conn, "demo"))
    return walked.broken is None and walked.rows > 0


async def test_a_claimer_killed_between_claim_and_row_leaves_a_row_from_the_next_start(opened: Callable[..., daemon.Daemon]) -> None:
    d = opened()
    wake_id = await _add(d)
    config = d.config
    child = await _child(CLAIMER, str(config.path), str(wake_id))
    try:
        assert await _line(child) == "claimed"
        assert d.stores is not None
        async with d.stores.pg_conn() as conn:
            shot = await controls.oneshot(conn, wake_id)
        assert shot is not None and shot.claimed_by is not None
        assert shot.claimed_by.startswith(f"{socket.gethostname()}:{child.pid}:")
        assert await _row(d, wake_id) is None  # claimed, and no row yet
    finally:
        child.kill()  # SIGKILL: nothing of the claimer runs after this
        await asyncio.wait_for(child.wait(), timeout=60)

    with structlog.testing.capture_logs() as logs:
        await d._close_abandoned_at_start()  # the next daemon on this host
        await d._close_abandoned_at_start()  # and again: one row, never two
    row = await _row(d, wake_id)
    assert row is not None
    assert (row.status, row.trigger, row.tier, row.manifest_root) == ("failed", "at", "whisper", None)
    assert row.error is not None and row.error.startswith(f"claimed, never run: its process {shot.claimed_by} died after claiming")
    assert row.finished_at is not None and row.started_at == shot.claimed_at
    assert [e["wake_id"] for e in logs if e["event"] == "wake.failed"] == [str(wake_id)]  # one row, written once
    assert await _chain_intact(d)


async def test_a_claimer_elsewhere_is_dead_once_it_stopped_beating(opened: Callable[..., daemon.Daemon]) -> None:
    a, b = opened(), opened()
    assert a.stores is not None
    long_ago = clock.now() - dt.timedelta(minutes=5)
    silent = await _add(a, claimed_by="elsewhere:11:aaaa", claimed_at=long_ago)  # no heartbeat, claimed long ago: dead
    beating = await _add(a, claimed_by="elsewhere:12:bbbb", claimed_at=long_ago)  # still beats: alive, its row will come
    fresh = await _add(a, claimed_by="elsewhere:13:cccc")  # no heartbeat yet, but claimed just now: not known dead
    unclaimed = await _add(a)  # pending: the one-shot loop's, not a dead claimer's
    state = control.ReplicaState(
        replica_id="elsewhere:12:bbbb", host="elsewhere", pid=12, version="0", started_at=long_ago, heartbeat_at=clock.now(),
    )
    await control.heartbeat(a.stores.redis, state, ttl_s=120)

    with structlog.testing.capture_logs() as logs:
        await asyncio.gather(a.close_unrecorded(), b.close_unrecorded())  # two replicas sweep at once
    got = {name: await _row(a, wake_id) for name, wake_id in (("silent", silent), ("beating", beating), ("fresh", fresh), ("unclaimed", unclaimed))}
    assert got["silent"] is not None and got["silent"].status == "failed"
    assert got["silent"].error == "claimed, never run: its process elsewhere:11:aaaa stopped beating after claiming it, before its row was written"
    assert (got["beating"], got["fresh"], got["unclaimed"]) == (None, None, None)
    assert [e["wake_id"] for e in logs if e["event"] == "wake.failed"] == [str(silent)]  # written once, by one of the two
    assert await _chain_intact(a)


async def test_a_trigger_taken_by_a_replica_killed_before_its_row_gets_one_and_its_requester_is_told(
    opened: Callable[..., daemon.Daemon],
) -> None:
    d = opened()
    assert d.stores is not None
    redis = d.stores.redis
    child = await _child(TAKER, str(d.config.path))
    try:
        taker = await _line(child)
        request = await control.request_wake(redis, "demo", "whisper", clock.now())
        assert await _line(child) == "running"
        assert await control.taken_lists(redis) == [taker]  # taken, seen through by nobody yet
        assert await _row(d, request.wake_id) is None
    finally:
        child.kill()
        await asyncio.wait_for(child.wait(), timeout=60)

    with structlog.testing.capture_logs() as logs:
        await d.close_unrecorded()  # the next replica on this host: the taker's pid is dead
        await d.close_unrecorded()
    row = await _row(d, request.wake_id)
    assert row is not None
    assert (row.status, row.trigger, row.tier, row.manifest_root) == ("failed", "manual", "whisper", None)
    assert row.error == f"claimed, never run: its process {taker} died on this host after claiming it, before its row was written"
    assert [e["wake_id"] for e in logs if e["event"] == "wake.failed"] == [str(request.wake_id)]
    assert await control.taken_lists(redis) == []  # nothing left taken, by the dead replica or this one
    told = [e async for e in control.events(redis, request.request_id, timeout_s=10)]
    assert [(e["event"], e["wake_id"]) for e in told] == [("started", str(request.wake_id)), ("settled", str(request.wake_id))]
    assert (told[-1]["status"], told[-1]["error"]) == ("failed", row.error)
    assert await _chain_intact(d)


async def test_a_trigger_taken_by_a_replica_that_still_beats_is_left_to_it(opened: Callable[..., daemon.Daemon]) -> None:
    d = opened()
    assert d.stores is not None
    redis = d.stores.redis
    request = await control.request_wake(redis, "demo", "whisper", clock.now())
    assert await control.next_request(redis, 5, taken_by="elsewhere:21:dddd") == request
    state = control.ReplicaState(
        replica_id="elsewhere:21:dddd", host="elsewhere", pid=21, version="0", started_at=clock.now(), heartbeat_at=clock.now(),
    )
    await control.heartbeat(redis, state, ttl_s=120)
    await d.close_unrecorded()
    assert await control.taken_lists(redis) == ["elsewhere:21:dddd"] and await _row(d, request.wake_id) is None
    await control.forget(redis, "elsewhere:21:dddd")  # it stops beating: dead
    await d.close_unrecorded()
    row = await _row(d, request.wake_id)
    assert row is not None and row.status == "failed" and "elsewhere:21:dddd stopped beating" in (row.error or "")
    assert await control.taken_lists(redis) == []


async def test_a_rowless_claim_whose_claimer_writes_its_row_after_the_check_keeps_that_one_row(
    store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a takeover's look back found the claim without a row; its claimer, only slow, wrote the row
    # between that check and this insert: the primary key keeps one row, and `lost` says it wrote none
    async with sessions.ready_session(store_config(DAEMON, AGENTS)) as s:
        slot = dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC)
        request = WakeRequest(agent_id="demo", tier=Tier.whisper, trigger=Trigger.schedule, scheduled_for=slot, wake_id=uuid.uuid4())
        assert await unrun.lost(s, request, now=clock.now()) is True  # the claimer's own row, as far as the table is concerned

        async def not_there_yet(conn: object, wake_id: uuid.UUID) -> None:
            return None

        monkeypatch.setattr(introspection, "get", not_there_yet)
        assert await unrun.lost(s, request, now=clock.now()) is False
        monkeypatch.undo()
        async with s.stores.pg_conn() as conn:
            rows = await conn.fetch("SELECT status FROM wake_introspection_ledger WHERE wake_id = $1", request.wake_id)
    assert [r["status"] for r in rows] == ["failed"]
