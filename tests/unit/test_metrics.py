"""The daemon's metrics, scraped over HTTP on loopback as Prometheus would and parsed with
prometheus_client's own parser."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from wake.observe import metrics
from wake.think.client import Usage

DEMO = {"demo": metrics.AgentInfo(daily_cost_cap_usd=0.5, timezone="Europe/Stockholm"), "scout": metrics.AgentInfo(tiers=("whisper",))}


@pytest.fixture
def served() -> Iterator[tuple[metrics.Metrics, metrics.Exposition]]:
    m = metrics.Metrics(agents=DEMO, version="0.1.0")
    exposition = metrics.serve("127.0.0.1:0", m)
    yield m, exposition
    exposition.close()


def scrape(exposition: metrics.Exposition) -> list[Sample]:
    reply = httpx.get(exposition.url, timeout=30)
    assert reply.status_code == 200
    return [sample for family in text_string_to_metric_families(reply.text) for sample in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float | None:
    """The one sample of `name` whose labels are exactly `labels`; None if there is none."""
    found = [s.value for s in samples if s.name == name and s.labels == labels]
    assert len(found) <= 1
    return found[0] if found else None


def test_settled_wakes_their_durations_and_spend(served: tuple[metrics.Metrics, metrics.Exposition]) -> None:
    m, exposition = served
    m.observe_settled("demo", "whisper", "completed", 0.2, Usage(prompt_tokens=1000, completion_tokens=50, cached_tokens=800, cost_usd=0.0125))
    m.observe_settled("demo", "whisper", "completed", 0.4, Usage(prompt_tokens=10, completion_tokens=5, cached_tokens=0, cost_usd=0.0005), refusals=2)
    m.observe_settled("demo", "whisper", "failed", 3.0)
    m.observe_settled("scout", "whisper", "quiet", 0.1)
    s = scrape(exposition)
    assert value(s, "wake_wakes_total", agent="demo", tier="whisper", status="completed") == 2
    assert value(s, "wake_wakes_total", agent="demo", tier="whisper", status="failed") == 1
    assert value(s, "wake_wakes_total", agent="scout", tier="whisper", status="quiet") == 1
    assert value(s, "wake_duration_seconds_count", agent="demo", tier="whisper") == 3
    assert value(s, "wake_duration_seconds_sum", agent="demo", tier="whisper") == pytest.approx(3.6)
    assert value(s, "wake_duration_seconds_bucket", agent="demo", tier="whisper", le="0.5") == 2
    assert value(s, "wake_model_tokens_total", agent="demo", tier="whisper", kind="prompt") == 1010
    assert value(s, "wake_model_tokens_total", agent="demo", tier="whisper", kind="completion") == 55
    assert value(s, "wake_model_tokens_total", agent="demo", tier="whisper", kind="cached") == 800
    assert value(s, "wake_model_cost_usd_total", agent="demo", tier="whisper") == pytest.approx(0.013)
    assert value(s, "wake_tool_refusals_total", agent="demo", tier="whisper") == 2
    assert value(s, "wake_build_info", version="0.1.0") == 1


def test_configured_agents_start_at_zero(served: tuple[metrics.Metrics, metrics.Exposition]) -> None:
    _, exposition = served
    s = scrape(exposition)
    for tier in metrics.TIERS:
        assert value(s, "wake_wakes_total", agent="demo", tier=tier, status="failed") == 0
    assert value(s, "wake_wakes_total", agent="scout", tier="whisper", status="failed") == 0
    assert value(s, "wake_wakes_total", agent="scout", tier="full", status="failed") is None  # scout has no full tier
    assert value(s, "wake_lease_losses_total", agent="scout") == 0
    assert value(s, "wake_fence_stale_refusals_total", agent="demo", store="postgres") == 0


def test_fire_lag_blocks_skips_leases_and_fences(served: tuple[metrics.Metrics, metrics.Exposition]) -> None:
    m, exposition = served
    m.observe_fire_lag("demo", "surface", 0.03)
    m.observe_fire_lag("demo", "surface", 42.0)
    m.observe_block("identity", 12.5, "ok")
    m.observe_block("graph", 1500.0, "failed")
    m.observe_block("graph", 0.4, "disabled")
    m.observe_skipped("demo", "whisper", "slot_taken")
    m.observe_skipped("demo", "whisper", "busy: another wake of the agent holds its lease (box:12:ab)")
    m.observe_skipped("demo", "full", "shutting down")
    m.observe_abandoned("demo", "full")
    m.lease_lost("demo")
    m.stale_fence("demo")
    m.stale_fence("demo", "neo4j")
    s = scrape(exposition)
    assert value(s, "wake_fire_lag_seconds_count", agent="demo", tier="surface") == 2
    assert value(s, "wake_fire_lag_seconds_bucket", agent="demo", tier="surface", le="0.05") == 1
    assert value(s, "wake_fire_lag_seconds_bucket", agent="demo", tier="surface", le="30.0") == 1
    assert value(s, "wake_arrival_block_latency_seconds_sum", block="identity") == pytest.approx(0.0125)
    assert value(s, "wake_arrival_blocks_total", block="graph", state="failed") == 1
    assert value(s, "wake_arrival_blocks_total", block="graph", state="disabled") == 1
    assert value(s, "wake_slots_skipped_total", agent="demo", tier="whisper", reason="slot_taken") == 1
    assert value(s, "wake_slots_skipped_total", agent="demo", tier="whisper", reason="busy") == 1
    assert value(s, "wake_slots_skipped_total", agent="demo", tier="full", reason="shutting_down") == 1
    assert value(s, "wake_wakes_total", agent="demo", tier="full", status="abandoned") == 1
    assert value(s, "wake_lease_losses_total", agent="demo") == 1
    assert value(s, "wake_fence_stale_refusals_total", agent="demo", store="postgres") == 1
    assert value(s, "wake_fence_stale_refusals_total", agent="demo", store="neo4j") == 1


def test_label_values_are_bounded_and_never_free_text(served: tuple[metrics.Metrics, metrics.Exposition]) -> None:
    m, exposition = served
    secret = "sk-or-v1-0123456789abcdef"
    m.observe_settled("intruder", "whisper", "completed", 0.1)
    m.observe_settled("demo", f"tier {secret}", f"exploded: {secret}", 0.1)
    m.observe_skipped("demo", "whisper", f"lease not taken: ConnectionError: redis://:{secret}@host")
    m.observe_skipped("demo", "whisper", f"made up: {secret}")
    m.stale_fence("demo", "sqlite")
    m.observe_block(f"block with {secret}", 1.0, "weird")
    for i in range(metrics.SPARE_BLOCKS + 5):
        m.observe_block(f"source_{i}", 1.0, "ok")
    s = scrape(exposition)
    assert all(secret not in v for sample in s for v in sample.labels.values())
    assert value(s, "wake_wakes_total", agent="other", tier="whisper", status="completed") == 1
    assert value(s, "wake_wakes_total", agent="demo", tier="other", status="other") == 1
    assert value(s, "wake_slots_skipped_total", agent="demo", tier="whisper", reason="lease_not_taken") == 1
    assert value(s, "wake_slots_skipped_total", agent="demo", tier="whisper", reason="other") == 1
    assert value(s, "wake_fence_stale_refusals_total", agent="demo", store="other") == 1
    blocks = {sample.labels["block"] for sample in s if sample.name == "wake_arrival_blocks_total"}
    assert len(blocks) == metrics.SPARE_BLOCKS + 1 and "other" in blocks
    assert value(s, "wake_arrival_blocks_total", block="other", state="other") == 1
    assert value(s, "wake_arrival_blocks_total", block="other", state="ok") == 5


def test_agent_ids_before_the_config_is_known_are_bounded_too() -> None:
    m = metrics.Metrics()
    for i in range(metrics.SPARE_AGENTS + 3):
        m.lease_lost(f"agent-{i}")
    m.lease_lost("two words")
    agents = {s.labels["agent"]: s.value for f in m.registry.collect() for s in f.samples if s.name == "wake_lease_losses_total"}
    assert len(agents) == metrics.SPARE_AGENTS + 1 and agents["other"] == 4


def test_daily_cap_remaining_is_for_the_agents_local_day() -> None:
    now = [dt.datetime(2026, 7, 16, 21, 30, tzinfo=dt.UTC)]  # 23:30 in Stockholm
    m = metrics.Metrics(agents=DEMO, now=lambda: now[0])
    exposition = metrics.serve("127.0.0.1:0", m)
    try:
        m.observe_daily_cost("demo", 0.4)
        m.observe_daily_cost("scout", 1.0)  # no cap: not shown
        s = scrape(exposition)
        assert value(s, "wake_daily_cost_cap_usd", agent="demo") == 0.5
        assert value(s, "wake_daily_cost_usd", agent="demo") == pytest.approx(0.4)
        assert value(s, "wake_daily_cost_cap_remaining_usd", agent="demo") == pytest.approx(0.1)
        assert value(s, "wake_daily_cost_cap_remaining_usd", agent="scout") is None
        now[0] += dt.timedelta(hours=1)  # past midnight in Stockholm (22:30 UTC): a new day, nothing spent
        s = scrape(exposition)
        assert value(s, "wake_daily_cost_usd", agent="demo") == 0
        assert value(s, "wake_daily_cost_cap_remaining_usd", agent="demo") == 0.5
        m.observe_daily_cost("demo", 0.7)  # over the cap: nothing remains, never less
        assert value(scrape(exposition), "wake_daily_cost_cap_remaining_usd", agent="demo") == 0
    finally:
        exposition.close()


def test_outbox_backlog_and_running_wakes_are_read_at_each_scrape() -> None:
    now = dt.datetime(2026, 7, 16, 9, 30, tzinfo=dt.UTC)
    m = metrics.Metrics(agents=DEMO, now=lambda: now)
    exposition = metrics.serve("127.0.0.1:0", m)
    backlog = [3]
    # the daemon's running wakes, as its heartbeat lists them (started_at an ISO string or a datetime)
    running: dict[str, dict[str, object]] = {
        "t1": {"agent": "demo", "tier": "full", "wake_id": "w1", "started_at": (now - dt.timedelta(minutes=40)).isoformat(), "fence": 3},
        "t2": {"agent": "demo", "tier": "full", "wake_id": "w2", "started_at": now - dt.timedelta(seconds=5), "fence": 4},
    }
    m.set_outbox_backlog(lambda: backlog[0])
    m.set_running(lambda: list(running.values()))
    try:
        s = scrape(exposition)
        assert value(s, "wake_outbox_backlog") == 3
        assert value(s, "wake_wakes_running", agent="demo", tier="full") == 2
        assert value(s, "wake_running_wake_age_seconds", agent="demo", tier="full") == 2400
        assert value(s, "wake_wakes_running", agent="scout", tier="whisper") == 0  # configured, none running
        backlog[0] = 0
        running.clear()
        s = scrape(exposition)
        assert value(s, "wake_outbox_backlog") == 0
        assert value(s, "wake_wakes_running", agent="demo", tier="full") == 0
        assert value(s, "wake_running_wake_age_seconds", agent="demo", tier="full") == 0
    finally:
        exposition.close()


def test_the_process_collector_is_there(served: tuple[metrics.Metrics, metrics.Exposition]) -> None:
    _, exposition = served
    names = {sample.name for sample in scrape(exposition)}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "python_info"} <= names


def test_two_registries_do_not_share_a_count() -> None:
    one, two = metrics.Metrics(agents=DEMO), metrics.Metrics(agents=DEMO)
    one.lease_lost("demo")

    def losses(m: metrics.Metrics) -> float:
        return next(s.value for f in m.registry.collect() for s in f.samples if s.name == "wake_lease_losses_total" and s.labels == {"agent": "demo"})

    assert (losses(one), losses(two)) == (1, 0)


def test_the_module_functions_feed_the_installed_metrics_only() -> None:
    m = metrics.Metrics(agents=DEMO)
    metrics.observe_skipped("demo", "whisper", "busy")  # none installed: nothing happens
    metrics.install(m)
    try:
        metrics.observe_settled("demo", "whisper", "completed", 1.0)
        metrics.observe_fire_lag("demo", "whisper", 0.2)
        metrics.observe_block("clock", 1.0, "ok")
        metrics.observe_skipped("demo", "whisper", "busy")
        metrics.observe_abandoned("demo", "whisper")
        metrics.lease_lost("demo")
        metrics.stale_fence("demo")
        metrics.observe_daily_cost("demo", 0.1)
    finally:
        metrics.install(None)
    metrics.lease_lost("demo")  # uninstalled again
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in m.registry.collect() for s in f.samples}
    assert samples[("wake_slots_skipped_total", (("agent", "demo"), ("reason", "busy"), ("tier", "whisper")))] == 1
    assert samples[("wake_lease_losses_total", (("agent", "demo"),))] == 1
    assert samples[("wake_wakes_total", (("agent", "demo"), ("status", "abandoned"), ("tier", "whisper")))] == 1
    assert samples[("wake_fire_lag_seconds_count", (("agent", "demo"), ("tier", "whisper")))] == 1
    assert samples[("wake_arrival_blocks_total", (("block", "clock"), ("state", "ok")))] == 1
    assert samples[("wake_fence_stale_refusals_total", (("agent", "demo"), ("store", "postgres")))] == 1
    assert samples[("wake_daily_cost_usd", (("agent", "demo"),))] == pytest.approx(0.1)


async def test_a_blocked_event_loop_shows_as_loop_lag() -> None:
    m = metrics.Metrics()
    task = asyncio.create_task(metrics.measure_loop_lag(m, interval_s=0.01))

    def lag() -> tuple[float, float]:
        samples = {(s.name, s.labels.get("le")): s.value for f in m.registry.collect() for s in f.samples if s.name.startswith("wake_event_loop_lag")}
        return samples[("wake_event_loop_lag_seconds_count", None)], samples[("wake_event_loop_lag_seconds_bucket", "0.1")]

    async def observed(count: int) -> None:
        while lag()[0] < count:
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(observed(1), 30)
        time.sleep(0.3)  # noqa: ASYNC251 - blocks the loop on purpose: the sleeping task wakes >= 0.29 s late
        before = lag()[0]
        await asyncio.wait_for(observed(before + 2), 30)
    finally:
        task.cancel()
    count, within_100ms = lag()
    assert count - within_100ms >= 1


@pytest.mark.parametrize(("listen", "expected"), [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)),
    (" localhost:0 ", ("localhost", 0)),
    ("[::1]:9464", ("::1", 9464)),
    ("0.0.0.0:65535", ("0.0.0.0", 65535)),
])
def test_listen_addresses(listen: str, expected: tuple[str, int]) -> None:
    assert metrics.parse_listen(listen) == expected


@pytest.mark.parametrize(
    "listen", ["9464", ":9464", "127.0.0.1", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:65536", "::1:9464", "[::1]9464", "[nope]:9464", ""]
)
def test_bad_listen_addresses_say_what_was_expected(listen: str) -> None:
    with pytest.raises(metrics.ListenError) as caught:
        metrics.serve(listen, metrics.Metrics())
    message = str(caught.value)
    assert "\n" not in message and message.startswith("bad metrics listen address: expected HOST:PORT") and repr(listen.strip()) in message
    assert caught.value.exit_code == 78


def test_a_port_in_use_is_one_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(metrics.ListenError) as caught:
            metrics.serve(f"127.0.0.1:{port}", metrics.Metrics())
    assert str(caught.value).startswith(f"cannot serve metrics on 127.0.0.1:{port}: ") and "\n" not in str(caught.value)


def test_closing_the_exposition_stops_the_server() -> None:
    exposition = metrics.serve("127.0.0.1:0", metrics.Metrics())
    assert httpx.get(exposition.url, timeout=30).status_code == 200
    exposition.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(exposition.url, timeout=30)
