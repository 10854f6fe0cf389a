"""What one wake costs the stores, counted (not timed): PostgreSQL round trips and commits of a
daemon-path whisper, and the pool's reset, which skips its round trip only when nothing can leak."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from ledgers import incidents, introspection
from tests.support import agents as agent_configs
from tests.support import sessions
from tests.support.openai_server import ScriptedServer
from tests.support.pg_count import CountingConnection, counted_pools
from tests.support.tasks import counting_tasks
from wake import stores
from wake.config import Config
from wake.context import WakeRequest
from wake.run import claim, incident_policy, session


# A whisper with a model route: the first one calls the model; the gate settles every later one
# `quiet`, its blocks unchanged, without a call.
def _whisper_only(url: str) -> str:
    whisper = agent_configs.whisper("15m", 'model = "scripted"')
    return agent_configs.route("scripted", url, "scripted-1", timeout_s=5) + agent_configs.toml(
        tiers={"whisper": whisper}, timezone="UTC", extra=[agent_configs.PERSONA],
    )

# A whisper the gate settles, on the default sources (the graph is disabled without Neo4j): the
# slot claim's transaction (4: BEGIN; the claim with the fence floor and the pause; the fence
# recorded, which also finds any rows left started, once Redis gave the lease; COMMIT), step 4's
# reads in one statement (1: the Cloister canary's, which finds nothing new to audit and reads the
# open findings the cloister block then shows; the tier's last toxic flow, which the binding's is
# compared with, written only when it changed, and the flows accepted at the tier; both previous
# wakes with the recent wakes the recent-wakes block shows), and the row written settled, with its
# contents and its chain link, in one statement that checks the fence and reads whether the tier
# has an open incident (1); with none open, no statement closes any (`wake.run.incident_policy`).
# The claim's transaction and the row commit.
WHISPER_TRIPS = 6
WHISPER_COMMITS = 2
# Three pooled connections: the slot claim's; step 4's (its reads, and the canary's audit or the
# binding's flow when there is one to record: `wake.run.cycle`); the settled row's.
WHISPER_ACQUIRES = 3
# Two Redis round trips: the lease taken and released, one script each (Redis also counts the
# commands the scripts run: SET NX and INCR, then GET and DEL).
WHISPER_REDIS = {"eval": 2, "set": 1, "incr": 1, "get": 1, "del": 1}
# No task of the arrival engine's: each of its sources reads only what the wake holds already
# (the canary's read, the previous wakes) and answers at once (`wake.arrival.engine.SourceFn`).
WHISPER_ARRIVAL_TASKS = 0

_SLOT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


async def _whisper(s: session.Session, n: int) -> Any:
    request = WakeRequest(
        agent_id="demo", tier="whisper", trigger="schedule", scheduled_for=_SLOT + dt.timedelta(minutes=15 * n), wake_id=uuid.uuid4(),
    )
    return await claim.run(s, request, owner=claim.owner(), claim=claim.Claim(by="test"))


# What a client sends when it opens a connection, not per whisper: a pool that grows under 16 at
# once opens more (an external Redis with a password and a database number sends AUTH and SELECT).
_HANDSHAKE = {"auth", "select", "hello", "client|setinfo", "client|setname"}


async def _redis_calls(st: stores.Stores) -> dict[str, int]:
    stats: dict[str, Any] = await st.redis.info("commandstats")
    calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    return {k: v for k, v in calls.items() if k not in _HANDSHAKE}


async def test_a_daemon_path_whisper_costs_its_counted_round_trips(store_config: Callable[..., Config]) -> None:
    with ScriptedServer() as server, counted_pools():
        config = store_config(agents=_whisper_only(server.url))
        async with sessions.ready_stores(config) as st:
            s = session.Session(config=config, stores=st, registry=session.build_registry(config))
            assert (await _whisper(s, 0)).status == "completed"  # the one model call
            for n in (1, 2):  # warm: the statement caches, the fence row
                assert (await _whisper(s, n)).status == "quiet"
            trips, commits = CountingConnection.totals()
            redis_before = await _redis_calls(st)
            acquired = _counting_acquisitions(st)
            with counting_tasks() as tasks:
                outcome = await _whisper(s, 3)
            acquires = len(acquired)
            redis_after = await _redis_calls(st)
            after = CountingConnection.totals()
            async with st.pg_conn() as conn:  # the quiet rows' links were computed in SQL: Python's walk agrees
                chain = introspection.walk("demo", await introspection.chain_rows(conn, "demo"), await introspection.chain_head(conn, "demo"))
    assert chain.why is None and chain.rows == 4
    assert outcome.status == "quiet" and outcome.recorded and len(server.requests) == 1
    assert {b.name for b in outcome.blocks if b.retrieval == "ok"} == {"identity", "memory", "cloister", "clock", "recent_wakes", "binding_diff"}
    assert (after[0] - trips, after[1] - commits) == (WHISPER_TRIPS, WHISPER_COMMITS)
    assert acquires == WHISPER_ACQUIRES
    assert len([t for t in tasks if t.endswith("wake/arrival/engine.py")]) == WHISPER_ARRIVAL_TASKS, tasks
    spent = {k: redis_after[k] - redis_before.get(k, 0) for k in redis_after if redis_after[k] != redis_before.get(k, 0)}
    spent.pop("info", None)
    assert spent == WHISPER_REDIS


def _counting_acquisitions(st: stores.Stores) -> list[float]:
    """From now on, one entry for each connection taken from the harness's pool (`pg_conn`)."""
    taken: list[float] = []
    pg_conn = st.pg_conn

    def counted(*args: Any, **kwargs: Any) -> Any:
        taken.append(asyncio.get_running_loop().time())
        return pg_conn(*args, **kwargs)

    st.pg_conn = counted  # type: ignore[method-assign]
    return taken


async def test_a_quiet_whisper_closes_the_incident_open_when_its_row_is_written(store_config: Callable[..., Config]) -> None:
    # The round trip a quiet whisper spares is the close of incidents that are not there: with one
    # open (a dead-man incident another replica opened), the quiet row closes it: the close (its
    # own commit), then the recovery's transaction (its notices, one per route: none here).
    with ScriptedServer() as server, counted_pools():
        config = store_config(agents=_whisper_only(server.url))
        async with sessions.ready_stores(config) as st:
            s = session.Session(config=config, stores=st, registry=session.build_registry(config))
            for n in (0, 1, 2):
                await _whisper(s, n)
            async with st.pg_conn() as conn:
                opened = await incident_policy.overdue(conn, config, agent_id="demo", tier="whisper", since=_SLOT, due=2, at=_SLOT)
            assert opened is not None
            trips, commits = CountingConnection.totals()
            outcome = await _whisper(s, 3)
            after = CountingConnection.totals()
            async with st.pg_conn() as conn:
                [closed] = await incidents.listing(conn, include_closed=True)
    assert outcome.status == "quiet" and closed.id == opened and closed.closed_by_wake == outcome.wake_id
    assert (after[0] - trips, after[1] - commits) == (WHISPER_TRIPS + 3, WHISPER_COMMITS + 2)


AT_ONCE = 16


def _agents_at_once(url: str) -> str:
    head = f'[models.scripted]\nbase_url = "{url}"\nmodel = "scripted-1"\ntimeout_s = 5\n'
    return head + "".join(
        f'[agents.a{i:02d}]\ntimezone = "UTC"\n[agents.a{i:02d}.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\nmodel = "scripted"\n'
        for i in range(AT_ONCE)
    )


async def test_sixteen_whispers_at_once_cost_sixteen_times_one(store_config: Callable[..., Config]) -> None:
    # At once on one loop (as the daemon runs them), the slot claims, the leases and the rows of
    # different agents wait on no one: no retry, no extra statement, no renewal. Each whisper
    # costs what one alone costs, and the lease is renewed by nobody (each wake is far shorter
    # than a third of the TTL).
    with ScriptedServer() as server, counted_pools():
        config = store_config(agents=_agents_at_once(server.url), WAKE_POSTGRES__POOL_MIN_SIZE="16", WAKE_POSTGRES__POOL_MAX_SIZE="16")
        async with sessions.ready_stores(config) as st:
            s = session.Session(config=config, stores=st, registry=session.build_registry(config))
            agents = sorted(config.agents)

            async def whisper(agent: str, n: int) -> Any:
                request = WakeRequest(
                    agent_id=agent, tier="whisper", trigger="schedule", scheduled_for=_SLOT + dt.timedelta(minutes=15 * n), wake_id=uuid.uuid4(),
                )
                return await claim.run(s, request, owner=claim.owner(), claim=claim.Claim(by="test"))

            for n in (0, 1, 2):  # the model call, then warm: the statement caches, the fence rows, the chain heads
                for agent in agents:
                    await whisper(agent, n)
            trips, commits = CountingConnection.totals()
            redis_before = await _redis_calls(st)
            outcomes = await asyncio.gather(*(whisper(agent, 3) for agent in agents))
            redis_after = await _redis_calls(st)
            after = CountingConnection.totals()
    assert [o.status for o in outcomes] == ["quiet"] * AT_ONCE and all(o.recorded for o in outcomes)
    assert (after[0] - trips, after[1] - commits) == (WHISPER_TRIPS * AT_ONCE, WHISPER_COMMITS * AT_ONCE)
    spent = {k: redis_after[k] - redis_before.get(k, 0) for k in redis_after if redis_after[k] != redis_before.get(k, 0)}
    for setup in ("info", "hello", "client"):  # the INFO itself, and Redis connections the pool opened for the 16
        spent.pop(setup, None)
    assert spent == {k: v * AT_ONCE for k, v in WHISPER_REDIS.items()}


async def _leftovers(st: stores.Stores) -> tuple[int, bool, int]:
    """On the pool's one connection: advisory locks held, whether a transaction is open, scratch rows."""
    async with st.pg_conn() as conn:
        locks = await conn.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        open_tx = conn.is_in_transaction() or await conn.fetchval("SELECT txid_current_if_assigned() IS NOT NULL")
        rows = await conn.fetchval("SELECT count(*) FROM scratch")
    return int(locks), bool(open_tx), int(rows)


async def test_nothing_a_failed_wake_leaves_on_a_connection_reaches_its_next_user(store_config: Callable[..., Config]) -> None:
    # One connection in the pool: whoever comes next gets the very connection the last user left.
    config = store_config(WAKE_POSTGRES__POOL_MIN_SIZE="1", WAKE_POSTGRES__POOL_MAX_SIZE="1")
    async with stores.connected(config) as st:
        async with st.pg_conn() as conn:
            await conn.execute("CREATE TABLE scratch (v int)")
            backend = await conn.fetchval("SELECT pg_backend_pid()")

        # A wake fails holding a session advisory lock and an open transaction with a write in it.
        with pytest.raises(RuntimeError):
            async with st.pg_conn() as conn:
                await conn.execute("SELECT pg_advisory_lock(4242)")
                await conn.transaction().start()
                await conn.execute("INSERT INTO scratch VALUES (1)")
                raise RuntimeError("the wake failed")
        assert await _leftovers(st) == (0, False, 0)

        # A body that ends normally but leaves its transaction open: rolled back, not committed.
        async with st.pg_conn() as conn:
            await conn.transaction().start()
            await conn.execute("INSERT INTO scratch VALUES (2)")
        assert await _leftovers(st) == (0, False, 0)

        # An operator's own SQL (untrusted) that takes a session lock and returns normally.
        async with st.pg_conn(trusted=False) as conn:
            await conn.execute("SELECT pg_advisory_lock(4243)")
        assert await _leftovers(st) == (0, False, 0)

        # A clean body keeps the connection (no reconnect hid the leftovers above).
        async with st.pg_conn() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") == backend
