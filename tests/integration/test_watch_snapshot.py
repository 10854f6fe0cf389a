"""The status view over a real daemon: a snapshot gathered the way `wake status` gathers it (Redis
heartbeats and leases) plus the newest ledger rows (PostgreSQL), drawn by `watch`."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

from rich.console import Console

from ledgers import introspection
from tests.conftest import DEMO_TIERS
from wake import stores
from wake.config import Config
from wake.daemon import notify
from wake.daemon import remote as operator
from wake.daemon import service as daemon
from wake.observe import watch

AGENTS = DEMO_TIERS.replace('every = "15m"', 'every = "1s"')  # a whisper every second: outcomes to show


async def test_the_view_of_a_running_daemon(store_config: Callable[..., Config]) -> None:
    config = store_config("[daemon]\nheartbeat_s = 0.2\n", agents=AGENTS)
    d = daemon.Daemon(config=config, notifier=notify.Notifier(None), handle_signals=False)
    runner = asyncio.create_task(d.run())
    console = Console(record=True, width=220, file=io.StringIO())
    try:
        async with stores.connected(config, neo4j=False) as st:

            async def fetch() -> dict[str, Any]:
                snap = await operator.status(config)
                async with st.pg_conn() as conn:
                    snap["recent"] = [r.columns() for r in await introspection.recent(conn, limit=5)]  # as `wake status --watch` reads them
                return snap

            async def settled() -> dict[str, Any]:
                while True:
                    snap = await fetch()
                    if snap["replicas"] and snap["next_fires"] and any(r["status"] == "completed" for r in snap["recent"]):
                        return snap
                    await asyncio.sleep(0.1)

            seen = await asyncio.wait_for(settled(), 60)
            await watch.watch(fetch, 0, console=console, frames=2)
    finally:
        d.request_stop()
        assert await asyncio.wait_for(runner, 30) == 0
    screen = console.export_text()
    assert "replicas (1 live)" in screen and d.replica_id in screen
    lines = screen.splitlines()
    for tier in ("whisper", "surface", "full"):
        assert any(line.split()[:2] == ["demo", tier] and "UTC" not in line and ("in " in line or "ago" in line) for line in lines), tier
    completed = next(r for r in seen["recent"] if r["status"] == "completed")
    assert any(str(completed["wake_id"])[:8] in line and "completed" in line and "schedule" in line for line in lines)
    assert any(line.split()[:1] == ["demo"] and line.split()[1] in ("yes", "no") for line in lines)  # the lease row
    assert "trigger requests waiting: 0" in screen
