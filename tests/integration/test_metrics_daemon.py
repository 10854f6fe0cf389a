"""The Prometheus endpoint of a real daemon running wakes, scraped over HTTP and read with
prometheus_client's own parser (docs/metrics.md): what it counts is what the ledger recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ledgers import introspection
from tests.conftest import DEMO_TIERS
from tests.support import processes
from wake import stores
from wake.config import Config
from wake.daemon import notify
from wake.daemon import service as daemon

AGENTS = DEMO_TIERS.replace('every = "15m"', 'every = "1s"')  # a whisper every second


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_a_running_daemon_serves_its_metrics(store_config: Callable[..., Config]) -> None:
    port = processes.free_port()
    config = store_config(f'[daemon]\nheartbeat_s = 0.2\n[metrics]\nlisten = "127.0.0.1:{port}"\n', agents=AGENTS)
    d = daemon.Daemon(config=config, notifier=notify.Notifier(None), handle_signals=False)
    runner = asyncio.create_task(d.run())
    try:
        async with stores.connected(config, neo4j=False) as st:

            async def two_completed() -> int:
                while True:
                    async with st.pg_conn() as conn:
                        rows = await introspection.recent(conn, agent_id="demo", tier="whisper", status="completed", limit=10)
                    if len(rows) >= 2:
                        return len(rows)
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(two_completed(), 120)
            async with httpx.AsyncClient() as http:
                answer = await http.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
            async with st.pg_conn() as conn:
                recorded = len(await introspection.recent(conn, agent_id="demo", tier="whisper", status="completed", limit=1000))
    finally:
        d.request_stop()
        assert await asyncio.wait_for(runner, 60) == 0
    assert answer.status_code == 200
    samples = _samples(answer.text)
    completed = samples[("wake_wakes_total", (("agent", "demo"), ("status", "completed"), ("tier", "whisper")))]
    # the scrape came between two reads of the ledger: it counted at least the first, at most the second
    assert 2 <= completed <= recorded
    assert samples[("wake_arrival_blocks_total", (("block", "clock"), ("state", "ok")))] >= completed
    assert samples[("wake_fire_lag_seconds_count", (("agent", "demo"), ("tier", "whisper")))] >= completed
    assert any(name == "process_resident_memory_bytes" for name, _ in samples)  # the standard process collector
    assert all("wake_id" not in dict(labels) for _, labels in samples)  # labels stay bounded
