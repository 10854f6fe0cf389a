"""Redis through Sentinel (`[redis] sentinels`, `master_name`): a primary, a replica and three
sentinels from Debian's packages (tests/support/sentinel.py). A wake's path runs through them; the
client follows the primary across `SENTINEL FAILOVER` and across a killed primary; a wake whose
lease a failover lost is refused at settle by its PostgreSQL-side fence, and its slot keeps one
row; the daily cost counter comes back from the ledger.

Sentinel's failover is asynchronous replication: a write the old primary acknowledged may never
reach the replica that is promoted (Jepsen). That loss is made deterministic here: after the
failover, the key the old primary held is deleted on the new one, as if its last writes were lost.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from ledgers.vocab import Trigger
from tests.conftest import DEMO_TIERS
from tests.support import pooler, processes, sentinel, sessions
from tests.support.openai_server import ScriptedServer, completion
from wake import config as wake_config
from wake import stores
from wake.context import WakeRequest
from wake.errors import StoreUnavailable
from wake.run import claim, cycle
from wake.stores import Stores, lease
from wake.think import budget

SLOT = dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC)
EVENT_WAIT_S = 60  # a bound on waiting for a wake to reach its think step (reached in well under a second)


@pytest.fixture
def sentinel_config(
    write_config: Callable[..., Path], pg_dsn: str, cluster: sentinel.SentinelCluster, tmp_path: Path,
) -> Callable[..., wake_config.Config]:
    """A Config over this test's database and the cluster's sentinels (no Redis URL)."""

    def make(extra: str = "", agents: str = DEMO_TIERS) -> wake_config.Config:
        body = f'state_dir = "{tmp_path / "state"}"\n[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}{cluster.toml()}{extra}\n{agents}'
        return wake_config.load_config_file(write_config(body), environ={})

    return make


def _slot_request(at: dt.datetime) -> WakeRequest:
    return WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=at)


async def _rows(st: Stores, at: dt.datetime) -> list[dict[str, Any]]:
    async with st.pg_conn() as conn:
        found = await conn.fetch("SELECT wake_id, status, fence, error FROM wake_introspection_ledger WHERE scheduled_for = $1", at)
    return [dict(r) for r in found]


async def _primary_port(st: Stores) -> int:
    """The port of the server the stores' client is connected to (its own answer)."""
    info = await st.redis.info("server")
    return int(info["tcp_port"])


async def test_a_wake_runs_through_sentinel_and_the_client_follows_failovers(
    sentinel_config: Callable[..., wake_config.Config], cluster: sentinel.SentinelCluster,
) -> None:
    config = sentinel_config()
    async with sessions.ready_session(config) as s:
        assert s.stores.redis_address == f"sentinel://{','.join(cluster.addresses)}/{sentinel.MASTER_NAME}"
        first = await claim.run(s, _slot_request(SLOT), owner="t", claim=claim.Claim(by="r1"))
        assert first is not None and first.recorded and first.status in ("completed", "quiet")
        assert await _primary_port(s.stores) == cluster.primary_port()
        fences = [r["fence"] for r in await _rows(s.stores, SLOT)]

        ports = [cluster.primary_port()]
        for n, fail in enumerate((cluster.failover, cluster.kill_primary), start=1):
            ports.append(await asyncio.to_thread(fail))
            at = SLOT + dt.timedelta(minutes=15 * n)
            after = await claim.run(s, _slot_request(at), owner="t", claim=claim.Claim(by="r1"))
            assert after is not None and after.recorded, after
            assert await _primary_port(s.stores) == ports[-1]  # the client asked the sentinels again
            assert [r["fence"] for r in await _rows(s.stores, at)] == [fences[0] + n]  # the fences go on growing
        # Each step moved the primary: the support returns only once every sentinel has named another
        # one. On a loaded machine the sentinels can then fail over once more, back to the old server
        # (`SentinelCluster._after_failover`: seen here after the kill, the restarted empty primary
        # promoted again), so a step may end on the port it began on; the client followed whatever
        # the cluster settled on (above), and the primary was not one server throughout.
        assert len(set(ports)) == 2 and cluster.failovers == 2
        async with s.stores.pg_conn() as conn:
            statuses = [r["status"] for r in await conn.fetch("SELECT status FROM wake_introspection_ledger ORDER BY scheduled_for")]
        assert len(statuses) == 3 and set(statuses) <= {"completed", "quiet"}


async def test_a_lease_lost_in_a_failover_is_refused_at_settle_and_its_slot_keeps_one_row(
    sentinel_config: Callable[..., wake_config.Config], cluster: sentinel.SentinelCluster, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A TTL far longer than the test: the first wake never renews (a renewal would see the loss and
    # cancel it); what stops it is its fence, checked in PostgreSQL when it settles.
    config = sentinel_config("[daemon]\nlease_ttl_s = 600\n")
    entered, release = asyncio.Event(), asyncio.Event()
    original = cycle.think

    async def held_think(ctx: Any, blocks: Any, models: Any) -> Any:
        if ctx.scheduled_for == SLOT:
            entered.set()
            await release.wait()
        return await original(ctx, blocks, models)

    monkeypatch.setattr(cycle, "think", held_think)
    async with sessions.ready_session(config) as s:
        first = asyncio.create_task(claim.run(s, _slot_request(SLOT), owner="old-holder", claim=claim.Claim(by="r1")))
        await asyncio.wait_for(entered.wait(), EVENT_WAIT_S)
        old_fence = await _fence_of(s.stores)
        await asyncio.to_thread(cluster.failover)
        with cluster.primary_client() as primary:
            assert primary.delete(lease.LEASE_KEY.format(agent="demo")) == 1  # the write the failover lost

        later = SLOT + dt.timedelta(minutes=15)
        second = await claim.run(s, _slot_request(later), owner="new-holder", claim=claim.Claim(by="r2"))
        assert second is not None and second.recorded
        with structlog.testing.capture_logs() as logs:
            release.set()
            refused = await asyncio.wait_for(first, EVENT_WAIT_S)

        assert refused is not None and refused.wake_id != second.wake_id
        settle = [e for e in logs if e["event"] in ("wake.settle_refused", "fence.stale")]
        assert [(e["event"], e["fence"], e["newest"]) for e in settle] == [
            ("fence.stale", old_fence, old_fence + 1), ("wake.settle_refused", old_fence, old_fence + 1)], settle
        rows, later_rows = await _rows(s.stores, SLOT), await _rows(s.stores, later)
        assert len(rows) == 1, rows  # the slot's one row: closed by the new holder, never overwritten by the old
        assert rows[0]["wake_id"] == refused.wake_id and rows[0]["status"] == "abandoned" and rows[0]["fence"] == old_fence
        assert len(later_rows) == 1 and later_rows[0]["fence"] == old_fence + 1
        assert later_rows[0]["status"] in ("completed", "quiet")


async def _fence_of(st: Stores) -> int:
    async with st.pg_conn() as conn:
        fence = await conn.fetchval("SELECT fence FROM agent_fences WHERE agent_id = 'demo'")
    assert isinstance(fence, int)
    return fence


COST_AGENTS = """
[models.scripted]
base_url = "{model}"
model = "scripted-1"
[agents.demo]
timezone = "UTC"
daily_cost_cap_usd = 5.0
[agents.demo.memory]
enabled = false
[agents.demo.tiers.surface]
binds = ["wake.whisper", "wake.surface"]
model = "scripted"
"""


@pytest.mark.parametrize("lost", ["missing", "behind"])
async def test_the_daily_cost_counter_is_reconciled_from_the_ledger_after_a_failover(
    sentinel_config: Callable[..., wake_config.Config], cluster: sentinel.SentinelCluster, lost: str,
) -> None:
    with ScriptedServer() as server:
        config = sentinel_config(agents=COST_AGENTS.format(model=server.url))
        server.push(completion("Spent some.", cost=0.30), completion("Spent more.", cost=0.20))
        async with sessions.ready_session(config) as s:
            run: Callable[[], Awaitable[cycle.WakeOutcome | None]] = lambda: claim.run(  # noqa: E731
                s, WakeRequest(agent_id="demo", tier="surface", trigger=Trigger.manual), owner="t")
            first = await run()
            assert first is not None and first.status == "completed"
            key = budget.cost_key("demo", "UTC", dt.datetime.now(dt.UTC))
            assert await s.stores.redis.get(key) == "300000"

            kill = lost == "missing"
            await asyncio.to_thread(cluster.kill_primary if kill else cluster.failover)
            with cluster.primary_client() as primary:  # the counter's last writes lost in the failover: all, or some
                if kill:
                    primary.delete(key)
                else:
                    primary.set(key, "100000", ex=budget.COST_KEY_TTL_S)

            cap = budget.DailyCap.of(s.stores, agent_id="demo", timezone="UTC", now=dt.datetime.now(dt.UTC), cap_usd=5.0)
            assert await cap.spent_usd() == pytest.approx(0.30)  # the ledger's, not the counter's
            assert await s.stores.redis.get(key) == "300000"
            second = await run()
            assert second is not None and second.status == "completed"
            assert await s.stores.redis.get(key) == "500000"
        assert len(server.requests) == 2



async def test_sentinels_that_do_not_answer_are_one_store_unavailable(write_config: Callable[..., Path], tmp_path: Path) -> None:
    port = processes.free_port()  # nothing listens there
    path = write_config(f'state_dir = "{tmp_path / "state"}"\n[redis]\nsentinels = ["127.0.0.1:{port}"]\nmaster_name = "wake"\n'
                        "socket_timeout_s = 2\n" + DEMO_TIERS)
    config = wake_config.load_config_file(path, environ={})
    url, embedded = await stores.resolve_redis_url(config)
    assert (url, embedded) == (f"sentinel://127.0.0.1:{port}/wake", False)  # no embedded Redis is started for it
    with pytest.raises(StoreUnavailable) as caught:
        await stores.open_redis(config, url)
    assert str(caught.value).startswith(f"redis unreachable at sentinel://127.0.0.1:{port}/wake: MasterNotFoundError")
    assert "\n" not in str(caught.value)


async def test_a_wake_runs_through_sentinels_and_a_primary_that_require_passwords_named_as_credentials(
    write_config: Callable[..., Path], pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`[redis] password_credential` and `sentinel_password_credential`: the primary's requirepass
    and the sentinels' own, read from $CREDENTIALS_DIRECTORY; without them the same cluster is one
    clear StoreUnavailable, and a named credential that is not there says which."""
    if (why := sentinel.available()) is not None:
        pytest.skip(why)
    guarded = sentinel.SentinelCluster.start(tmp_path / "guarded", password="primary-secret-1", sentinel_password="sentinel-secret-2")
    try:
        creds = tmp_path / "credentials"
        creds.mkdir()
        (creds / "redis_password").write_text("primary-secret-1\n")
        (creds / "sentinel_password").write_text("sentinel-secret-2\n")
        monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))

        def config(keys: str) -> wake_config.Config:
            body = f'state_dir = "{tmp_path / "state"}"\n[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}{guarded.toml()}{keys}\n{DEMO_TIERS}'
            return wake_config.load_config_file(write_config(body), environ={})

        named = config('password_credential = "redis_password"\nsentinel_password_credential = "sentinel_password"\n')
        async with sessions.ready_session(named) as s:
            done = await claim.run(s, _slot_request(SLOT), owner="t", claim=claim.Claim(by="r1"))
            assert done is not None and done.recorded and done.status in ("completed", "quiet")
            assert await _primary_port(s.stores) == guarded.primary_port()

        for keys, reason in (
            ("", "auth"),  # neither password: the sentinels refuse
            ('sentinel_password_credential = "sentinel_password"\n', "auth"),  # the primary refuses
            ('password_credential = "missing_one"\nsentinel_password_credential = "sentinel_password"\n', "credential missing_one is not set"),
        ):
            with pytest.raises(StoreUnavailable) as refused:
                await stores.open_redis(config(keys), stores.sentinel_address(config(keys)))
            assert refused.value.store == "redis" and reason in refused.value.reason.lower() + refused.value.reason, refused.value.reason
    finally:
        guarded.stop()
