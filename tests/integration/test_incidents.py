"""Incidents (docs/incidents.md) on the real wake path: failing wakes of a tier open one incident
with one notice per route (sent by the daemon's sender to a loopback receiver), later failures
only count, a success closes it with one recovery notice; `pause_after_failures` pauses the tier
with a reason naming the incident. The error signature normalises ids, numbers, paths and hex."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ledgers import controls, incidents
from tests.support import agents as agent_configs
from tests.support import sending, wakes
from tests.support.openai_server import ScriptedServer, completion, error
from tests.support.webhook_receiver import Receiver
from wake import clock, stores
from wake.config import Config


def _config(store_config: Callable[..., Config], server: ScriptedServer, receiver: Receiver, pause_after: int | None) -> Config:
    extra = agent_configs.scripted(server.url) + f"""
[delivery.hook]
kind = "apprise"
url = "{receiver.url.replace("http://", "json://")}"
timeout_s = 10
max_attempts = 3
backoff_s = 0.01
backoff_max_s = 0.05
"""
    pause = f"pause_after_failures = {pause_after}\n" if pause_after is not None else ""
    surface = f'every = "1h"\nbinds = ["wake.surface"]\nmodel = "scripted"\ndeliver_to = ["hook"]\n{pause}'
    return store_config(extra, agents=agent_configs.toml(tiers={"surface": surface}, timezone="UTC"))


async def _incidents(config: Config) -> list[incidents.Incident]:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        return await incidents.listing(conn, include_closed=True)


async def _pause(config: Config) -> controls.Pause | None:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        return await controls.pause_for(conn, "demo", "surface", clock.now())


async def test_three_failures_open_one_incident_with_one_notice_and_a_success_closes_it_with_one_recovery(
    store_config: Callable[..., Config], server: ScriptedServer,
) -> None:
    with Receiver() as receiver:
        config = _config(store_config, server, receiver, None)
        for n in range(3):
            server.push(error(500, f"upstream broke at request {n} id 0x{n:08x}"))
            assert (await wakes.once(config, tier="surface")).status == "failed"
        assert await sending.send_due(config) == 1
        [opened] = await _incidents(config)
        assert opened.closed_at is None and opened.rows_seen == 3
        assert len(receiver.requests) == 1 and "incident" in receiver.requests[0].json["message"]

        server.push(error(500, "upstream broke at request 3 id 0x00000003"))
        assert (await wakes.once(config, tier="surface")).status == "failed"
        assert await sending.send_due(config) == 0  # the fourth only counts
        assert len(receiver.requests) == 1

        server.push(completion("All clear."))
        assert (await wakes.once(config, tier="surface")).status == "completed"
        assert await sending.send_due(config) == 2  # the wake's own delivery and one recovery notice
        [closed] = await _incidents(config)
        assert closed.closed_at is not None and closed.rows_seen == 4
        messages = [r.json["message"] for r in receiver.requests]
        assert sum("recovered" in m for m in messages) == 1 and sum(m.startswith("All clear.") for m in messages) == 1
        assert len(set(receiver.acted_on)) == len(receiver.acted_on) == 3
        assert await _pause(config) is None  # pause_after_failures is off by default


async def test_pause_after_failures_pauses_the_tier_naming_the_incident(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    with Receiver() as receiver:
        config = _config(store_config, server, receiver, 3)
        for n in range(2):
            server.push(error(500, f"broke {n}"))
            await wakes.once(config, tier="surface")
        assert await _pause(config) is None
        server.push(error(500, "broke 2"))
        await wakes.once(config, tier="surface")
        [inc] = await _incidents(config)
        pause = await _pause(config)
        assert pause is not None and pause.reason is not None and f"incident {inc.id}" in pause.reason
        from wake.cli import controls as controls_cli
        from wake.cli import render

        shown = render.controls_lines(await controls_cli.snapshot(config, clock.now()))  # what `wake status` prints of the pauses
        assert any(f"incident {inc.id}" in line and "demo" in line and "surface" in line for line in shown), shown


@given(st.text(max_size=40), st.integers(min_value=0, max_value=10**12), st.uuids())
def test_a_signature_does_not_depend_on_ids_numbers_or_hex(stem: str, number: int, wake_id: Any) -> None:
    a = incidents.signature(f"{stem} wake {wake_id} at /var/lib/wake/{number}/x.db port {number} key {number:016x}")
    b = incidents.signature(f"{stem} wake 00000000-0000-0000-0000-000000000000 at /tmp/a/b port 7 key 0123456789abcdef")
    assert a == b and len(a) <= incidents.SIGNATURE_MAX


async def test_the_watch_puts_open_incidents_per_agent_into_the_gauge(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    from wake.daemon import incident_watch
    from wake.observe import metrics

    with Receiver() as receiver:
        config = _config(store_config, server, receiver, None)
        server.push(error(500, "broke"))
        await wakes.once(config, tier="surface")
        m = metrics.Metrics(agents={"demo": metrics.AgentInfo(tiers=("surface",), daily_cost_cap_usd=None, timezone="UTC")})
        async with stores.connected(config) as st:
            assert await incident_watch.refresh(st, m) == {"demo": 1}
        assert m.registry.get_sample_value("wake_open_incidents", {"agent": "demo"}) == 1.0


async def test_two_replicas_checking_an_overdue_tier_open_one_dead_man_incident_and_a_success_closes_it(
    store_config: Callable[..., Config], server: ScriptedServer,
) -> None:
    import asyncio
    import dataclasses
    import datetime as dt

    from ledgers import introspection
    from wake.daemon import deadman, incident_watch
    from wake.observe import metrics
    from wake.run import incident_policy as incidents_run

    with Receiver() as receiver:
        config = _config(store_config, server, receiver, None)  # surface every 1h, delivered to the hook
        server.push(completion("All clear."))
        assert (await wakes.once(config, tier="surface")).status == "completed"
        assert await sending.send_due(config) == 1
        async with stores.connected(config) as st:
            async with st.pg_conn() as conn:
                lasts = await introspection.last_settled(conn, [("demo", "surface")])
            settled_at = lasts[("demo", "surface")].finished_at
            assert settled_at is not None
            assert deadman.overdue(config, lasts, set(), clock.now(), {}) == []  # not overdue now
            # as if it had settled three hours ago: two slots and more since
            old = {k: dataclasses.replace(v, finished_at=settled_at - dt.timedelta(hours=3)) for k, v in lasts.items()}
            async with st.pg_conn() as a, st.pg_conn() as b:  # two replicas' rounds at once
                got = await asyncio.gather(deadman.check(a, config, old, clock.now(), {}), deadman.check(b, config, old, clock.now(), {}))
            assert sorted(len(g) for g in got) == [0, 1]
            async with st.pg_conn() as conn:
                assert await deadman.check(conn, config, old, clock.now(), {}) == []  # a later round: still the one
            m = metrics.Metrics(agents={"demo": metrics.AgentInfo(tiers=("surface",))})
            assert await incident_watch.refresh(st, m, config, first_seen={}) == {"demo": 1}
            assert m.registry.get_sample_value("wake_last_settled_timestamp_seconds", {"agent": "demo", "tier": "surface"}) == settled_at.timestamp()
        [inc] = await _incidents(config)
        assert inc.closed_at is None and inc.signature.startswith("missed: no settled row since") and inc.rows_seen == 1
        assert await sending.send_due(config) == 1  # one notice
        assert "dead-man check" in receiver.requests[-1].json["message"]
        async with stores.connected(config) as st, st.pg_conn() as conn:
            payload = await conn.fetchval("SELECT payload FROM wake_outbox WHERE wake_id = $1", incidents_run.notice_id(inc.id, "opened"))
        assert '"deadman": true' in payload and '"about_wake": null' in payload

        server.push(completion("Back."))
        assert (await wakes.once(config, tier="surface")).status == "completed"
        [closed] = await _incidents(config)
        assert closed.closed_at is not None
        assert await sending.send_due(config) == 2  # the wake's own delivery and one recovery notice


@given(st.sampled_from(["postgres", "redis", "neo4j", "postgres (tool role)"]), st.text(max_size=80), st.text(max_size=80))
def test_one_outage_is_one_signature_whatever_the_driver_called_it(store: str, reason_a: str, reason_b: str) -> None:
    from wake.errors import StoreUnavailable

    a = incidents.signature(str(StoreUnavailable(store, "postgresql://postgres@127.0.0.1:57383/wake", f"ConnectionError: {reason_a}")))
    b = incidents.signature(str(StoreUnavailable(store, "unix:///run/wake/redis.sock", f"ConnectionDoesNotExistError: {reason_b}")))
    assert a == b == incidents.signature(f"{store} unreachable")  # the store alone (numbers normalised as ever: neo<n>j)
    assert incidents.signature("model scripted-1 at http://127.0.0.1:9/v1: HTTP 500") != a  # other failures keep their text
