"""`wake trigger` is told what the row says: a manual wake the daemon cancels (its drain timed out)
reports the canceller's reason, the row's error, not a bare `cancelled`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from tests.support import daemons, sessions
from wake import clock
from wake.config import Config
from wake.daemon import control


async def test_a_cancelled_manual_wake_reports_the_rows_reason(store_config: Callable[..., Config], tmp_path: Path) -> None:
    gate = tmp_path / "started"
    script = tmp_path / "hold.sh"
    script.write_text(f"#!/bin/sh\ntouch {gate}\nexec sleep 60\n")
    script.chmod(0o755)
    agents = f'[agents.demo]\n[agents.demo.tiers.surface]\nbinds = ["wake.whisper"]\nprecheck = ["{script}"]\nprecheck_timeout_s = 120\n'
    config = store_config(agents=agents)
    async with sessions.ready_session(config) as s:
        d, st = daemons.in_process(s), s.stores
        req = await control.request_wake(st.redis, "demo", "surface", clock.now())
        popped = await control.next_request(st.redis, 5)
        assert popped == req
        task = asyncio.create_task(d.run_manual(popped))
        async with asyncio.timeout(60):
            while not gate.exists():  # the wake is in its pre-check, which holds it
                await asyncio.sleep(0.05)
        reason = "drain timeout on SIGTERM after 3 s"
        task.cancel(reason)
        async with asyncio.timeout(60):
            while not task.done():
                await asyncio.sleep(0.05)
        started, settled = [e async for e in control.events(st.redis, req.request_id, 5)]
        async with st.pg_conn() as conn:
            row = dict(await conn.fetchrow("SELECT status, error FROM wake_introspection_ledger WHERE wake_id = $1::uuid", started["wake_id"]))
    assert settled["status"] == "aborted" and settled["error"] == reason
    assert row == {"status": "aborted", "error": reason}  # the same words as the row
