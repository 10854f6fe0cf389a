"""Lease and fence over real Redis and PostgreSQL: one holder, a fence that only grows, stale writes refused."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from ledgers import fences, introspection, slots
from ledgers.errors import StaleFence
from ledgers.vocab import Trigger
from tests.support import sessions, wakes
from wake import stores
from wake.config import Config
from wake.context import WakeRequest
from wake.errors import StoreUnavailable
from wake.run import claim, cycle, session, unrun
from wake.stores import lease


async def test_one_holder_at_a_time_and_fences_grow(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        first = await lease.acquire(st, "demo", ttl_ms=5000, owner="a")
        with pytest.raises(lease.LeaseBusy) as busy:
            await lease.acquire(st, "demo", ttl_ms=5000, owner="b")
        assert busy.value.holder == first.token
        intruder = lease.Lease(agent_id="demo", token="not-the-holder", fence=0, ttl_ms=5000, redis=st.redis)
        assert await intruder.release() is False
        assert await lease.holder(st.redis, "demo") == first.token
        assert await first.release() is True
        second = await lease.acquire(st, "demo", ttl_ms=5000)
        assert second.fence == first.fence + 1
        async with st.pg_conn() as conn:
            assert await fences.newest(conn, "demo") == second.fence
        await second.release()


async def test_fence_counter_is_seeded_from_postgres_after_redis_loses_it(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        for _ in range(3):
            await (await lease.acquire(st, "demo", ttl_ms=5000)).release()
        await st.redis.flushdb()  # Redis lost its data
        again = await lease.acquire(st, "demo", ttl_ms=5000)
        assert again.fence == 4
        await again.release()


async def test_stale_fence_writes_nothing(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        old = await lease.acquire(st, "demo", ttl_ms=5000)
        await st.redis.delete(lease.LEASE_KEY.format(agent="demo"))  # the old holder's lease expired
        new = await lease.acquire(st, "demo", ttl_ms=5000)
        await st.pg.execute("CREATE TABLE scratch (v int)")
        with pytest.raises(StaleFence):
            async with lease.fenced(st, "demo", old.fence) as conn:
                await conn.execute("INSERT INTO scratch VALUES (1)")
        async with lease.fenced(st, "demo", new.fence) as conn:
            await conn.execute("INSERT INTO scratch VALUES (2)")
        assert [r["v"] for r in await st.pg.fetch("SELECT v FROM scratch")] == [2]

        registry = session.build_registry(config)
        stale = await wakes.run(config, st, registry, agent_id="demo", tier="whisper", fence=old.fence)
        assert stale.status == "failed" and "stale fence" in (stale.error or "") and stale.recorded is False
        fresh = await wakes.run(config, st, registry, agent_id="demo", tier="whisper", fence=new.fence)
        assert fresh.status == "completed" and fresh.recorded
        async with st.pg_conn() as conn:
            rows = await introspection.recent(conn, limit=10)
        assert [r.wake_id for r in rows] == [fresh.wake_id]


async def test_lost_lease_cancels_the_guarded_task(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        work = asyncio.create_task(asyncio.sleep(30))
        async with lease.held(st, "demo", ttl_ms=300, guarded=work) as held:
            await st.redis.set(lease.LEASE_KEY.format(agent="demo"), "someone-else")
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(work, timeout=3)
            assert held.lost.is_set()
        assert await lease.holder(st.redis, "demo") == "someone-else"  # not ours to release


async def _waiting_on_a_lock(st: stores.Stores) -> None:
    """Return once a backend of this test's database is blocked on a lock (an event PostgreSQL
    reports, polled). Any backend, not the second connection's pid: through a transaction pooler
    a client's statements need not run on the backend its earlier one did."""
    while True:
        async with st.pg_conn() as conn:
            if await conn.fetchval(
                "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            ):
                return
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("first_commits", [True, False])
async def test_a_slot_claimed_in_an_open_transaction_decides_for_the_second_claimer(
    store_config: Callable[..., Config], first_commits: bool,
) -> None:
    # The daemon takes the lease inside the slot claim's transaction (wake.run.claim): a second
    # replica's claim of the same slot waits for that transaction, then finds the slot taken if
    # it committed, or wins it if it rolled back (the first replica died before its fence was in).
    config = store_config(WAKE_POSTGRES__POOL_MAX_SIZE="4")
    slot = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)

    async def claim(conn: object, by: str) -> slots.Claimed:
        return await slots.claim_reading_fence(
            conn, agent_id="demo", tier="whisper", scheduled_for=slot, trigger=Trigger.schedule, claimed_by=by, claimed_at=slot,
            wake_id=uuid.uuid4(),
        )

    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as first, st.pg_conn() as second:
            tx = first.transaction()
            await tx.start()
            assert (await claim(first, "r1")).won
            racing = asyncio.create_task(claim(second, "r2"))
            await asyncio.wait_for(_waiting_on_a_lock(st), 60)
            assert not racing.done()
            await (tx.commit() if first_commits else tx.rollback())
            got = await asyncio.wait_for(racing, 60)
        async with st.pg_conn() as conn:
            holder = await slots.holder(conn, "demo", "whisper", slot)
    assert got.won is not first_commits
    assert holder is not None and holder.claimed_by == ("r1" if first_commits else "r2")


async def test_postgresql_failing_inside_the_claim_rolls_the_claim_back_and_frees_the_lease(store_config: Callable[..., Config]) -> None:
    # The fence is recorded inside the slot claim's transaction. If PostgreSQL does not answer
    # in time there (here: the agent's fence row is locked by another session), the claim rolls
    # back with the fence, the Redis lease is released, and the slot is left unclaimed for the
    # daemon's spool (StoreUnavailable), not spent without a row.
    config = store_config(WAKE_POSTGRES__COMMAND_TIMEOUT_S="1", WAKE_POSTGRES__POOL_MAX_SIZE="4")  # the timeout is what is under test
    slot = dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC)
    async with sessions.ready_stores(config) as st:
        s = session.Session(config=config, stores=st, registry=session.build_registry(config))
        first = await claim.run(s, WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=slot),
                                owner="a", claim=claim.Claim(by="r1"))
        assert first is not None and first.recorded  # the agent now has a fence row to lock
        later = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=slot + dt.timedelta(minutes=15))
        async with st.pg_conn() as blocker, blocker.transaction():
            await blocker.execute("SELECT fence FROM agent_fences WHERE agent_id = 'demo' FOR UPDATE")
            with pytest.raises(StoreUnavailable, match="slot claim got no answer"):
                await claim.run(s, later, owner="a", claim=claim.Claim(by="r1"))
        assert await lease.holder(st.redis, "demo") is None
        async with st.pg_conn() as conn:
            assert await slots.holder(conn, "demo", "whisper", later.scheduled_for) is None
            assert await conn.fetchval("SELECT count(*) FROM wake_introspection_ledger WHERE scheduled_for = $1", later.scheduled_for) == 0
        again = await claim.run(s, later, owner="a", claim=claim.Claim(by="r1"))  # unclaimed: it can still run
    assert again is not None and again.recorded


async def test_a_lease_lost_while_the_aborted_row_is_written_still_leaves_the_row(
    store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by the chaos run over Sentinel: a claimed wake whose fence went stale before its row
    # (a failover lost its lease and another holder took a newer fence) writes its `aborted` row
    # after the wake; the renewal then finds the lease gone and cancels the task. The row is
    # written all the same. Deterministic: the renewal is run by hand inside the row's write.
    config = store_config("[daemon]\nlease_ttl_s = 600\n")  # no renewal of its own during the test
    slot = dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC)
    taken: list[lease.Lease] = []
    original_take, original_run, original_stale = claim.take_lease, cycle.run_wake, unrun.stale

    async def take_lease(*args: Any, **kw: Any) -> lease.Lease:
        taken.append(await original_take(*args, **kw))
        return taken[-1]

    async def run_wake(*args: Any, **kw: Any) -> Any:  # before the wake's first write, another holder takes a newer fence
        await st.redis.delete(lease.LEASE_KEY.format(agent="demo"))
        await lease.acquire(st, "demo", ttl_ms=600_000, owner="newer")
        return await original_run(*args, **kw)

    async def stale(*args: Any, **kw: Any) -> None:
        await taken[0]._renew_once()  # finds the lease the newer holder's: lost, and the wake's task cancelled
        await asyncio.sleep(0)  # where a cancellation of this task would land
        await original_stale(*args, **kw)

    monkeypatch.setattr(claim, "take_lease", take_lease)
    monkeypatch.setattr(cycle, "run_wake", run_wake)
    monkeypatch.setattr(unrun, "stale", stale)
    async with sessions.ready_stores(config) as st:
        s = session.Session(config=config, stores=st, registry=session.build_registry(config))
        request = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=slot)
        outcome = await claim.run(s, request, owner="old", claim=claim.Claim(by="r1"))
        assert outcome is not None and not outcome.recorded and taken[0].lost.is_set()
        async with st.pg_conn() as conn:
            rows = await conn.fetch("SELECT status, error FROM wake_introspection_ledger WHERE scheduled_for = $1", slot)
    assert [r["status"] for r in rows] == ["aborted"], rows
