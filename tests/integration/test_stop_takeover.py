"""A replica that took agents over stops at once: a taken-over slot sleeping out its jitter ends
on the stop event, so the drain finds nothing to wait for (issue 46). Counted, not timed: the drain
may wait 600 s, and the test's bounded wait is far shorter."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable

import structlog

from tests.support import agents, daemons
from wake.config import Config
from wake.daemon import drain, ownership, schedule

AGENTS = 200
JITTER_S = 3000
SLOT = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


async def test_slots_sleeping_out_their_jitter_end_at_once_on_stop(store_config: Callable[..., Config]) -> None:
    body = "\n".join(agents.toml(f"a{i}", tiers={"whisper": f'every = "1h"\njitter_s = {JITTER_S}\nbinds = ["wake.whisper"]'})
                     for i in range(AGENTS))
    config = store_config("[daemon]\ndrain_s = 600\nheartbeat_s = 0.2\n", agents=body)
    ran: list[dt.datetime] = []

    async def run_slot(sched: schedule.Schedule, slot: dt.datetime, delay: float) -> None:
        ran.append(slot)

    now = SLOT + dt.timedelta(seconds=1)
    async with daemons.factory(config) as make:
        d = make(now=lambda: now)
        scheds = list(d.schedules.values())
        ahead = [s for s in scheds if schedule.jitter_delay_s(s, SLOT) > 1]
        for sched in scheds:
            d._spawn(ownership._late(sched, SLOT, lambda: now, run_slot, d.stop), name=f"taken-over:{sched.agent_id}")
        for _ in range(20):
            await asyncio.sleep(0)
        sleeping = sum(1 for t in d.tasks if not t.done())
        with structlog.testing.capture_logs() as logged:
            d.request_stop()
            async with asyncio.timeout(120):
                await drain.shutdown(d, [])
    assert len(ahead) > AGENTS * 0.9 and sleeping == len(ahead)
    assert [e for e in logged if e["event"] == "daemon.drain_timeout"] == []
    assert sum(1 for t in d.tasks if not t.done()) == 0
    assert len(ran) == AGENTS - len(ahead)  # only those whose jitter had passed ran; none after the stop
    draining = [e["tasks"] for e in logged if e["event"] == "daemon.draining"]
    assert draining in ([], [0]) or max(draining) < len(ahead)  # they ended on the stop event, not in the drain's wait
