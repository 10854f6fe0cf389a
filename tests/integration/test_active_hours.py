"""Active hours over real PostgreSQL and Redis: a slot outside its tier's windows is claimed and
gets one `skipped` row (inactive_hours), like a paused one; inside, it runs; a one-shot, a manual
wake and a catch-up judged at its run time follow their own rules."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

from ledgers import controls
from ledgers.vocab import Trigger
from tests.support import agents as agent_configs
from tests.support import sessions
from wake import stores
from wake.config import Config
from wake.context import WakeRequest
from wake.run import claim, session

AGENTS = agent_configs.toml(tiers={"whisper": agent_configs.whisper("1h", 'active_hours = ["mon-fri 09:00-17:00"]')}, extra=[agent_configs.PERSONA])
FRIDAY_NIGHT = dt.datetime(2026, 12, 4, 21, 0, tzinfo=dt.UTC)  # 22:00 in Stockholm
MONDAY_MORNING = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)  # 10:00 in Stockholm


async def _rows(st: stores.Stores) -> list[dict[str, Any]]:
    async with st.pg_conn() as conn:
        return [dict(r) for r in await conn.fetch("SELECT wake_id, status, note, trigger FROM wake_introspection_ledger ORDER BY started_at")]


async def test_a_slot_outside_its_active_hours_gets_one_skipped_row_and_inside_it_runs(store_config: Callable[..., Config]) -> None:
    config = store_config(agents=AGENTS)
    async with sessions.ready_stores(config) as st:
        s = session.Session(config=config, stores=st, registry=session.build_registry(config), models=None)
        night = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=FRIDAY_NIGHT)
        first = await claim.run(s, night, owner="t", claim=claim.Claim(by="r1"), now=lambda: FRIDAY_NIGHT)
        second = await claim.run(s, night, owner="t", claim=claim.Claim(by="r2"), now=lambda: FRIDAY_NIGHT)  # the slot, claimed once
        morning = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=MONDAY_MORNING)
        ran = await claim.run(s, morning, owner="t", claim=claim.Claim(by="r1"), now=lambda: MONDAY_MORNING)
        # a catch-up is judged when it would run: on Friday night it is skipped, whatever its slot
        late = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.catch_up, scheduled_for=MONDAY_MORNING - dt.timedelta(days=7))
        caught = await claim.run(s, late, owner="t", claim=claim.Claim(by="r1"), now=lambda: FRIDAY_NIGHT)
        # a manual wake and a one-shot were asked for at their time: active hours do not hold them
        manual = await claim.run(s, WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.manual), owner="t", now=lambda: FRIDAY_NIGHT)
        shot_id = uuid.uuid4()
        async with st.pg_conn() as conn:
            await controls.add_oneshot(conn, wake_id=shot_id, agent_id="demo", tier="whisper", fire_at=FRIDAY_NIGHT, note=None,
                                       created_by="op", created_at=FRIDAY_NIGHT)
        shot = await claim.run(s, WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.at, wake_id=shot_id), owner="t",
                               claim=claim.Claim(by="r1"), now=lambda: FRIDAY_NIGHT)
        rows = await _rows(st)
    assert first is None and second is None and caught is None
    assert ran is not None and ran.status == "completed"
    assert manual is not None and manual.status == "completed" and shot is not None and shot.status == "completed"
    skipped = [r for r in rows if r["status"] == "skipped"]
    reason = "skipped: inactive_hours: Fri 22:00 Europe/Stockholm is outside the tier's active hours (mon-fri 09:00-17:00)"
    assert [(r["trigger"], r["note"]) for r in skipped] == [("schedule", reason), ("catch_up", reason)]
    assert len(rows) == 5  # one row per claim: two skipped, three that ran


async def test_a_pause_is_named_before_active_hours(store_config: Callable[..., Config]) -> None:
    config = store_config(agents=AGENTS)
    async with sessions.ready_stores(config) as st:
        s = session.Session(config=config, stores=st, registry=session.build_registry(config), models=None)
        async with st.pg_conn() as conn:
            await controls.pause(conn, agent_id="demo", tier=None, paused_by="erin", paused_at=FRIDAY_NIGHT, until=None, reason=None)
        why = await claim.held_back(s, WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=FRIDAY_NIGHT),
                                    FRIDAY_NIGHT)
        async with st.pg_conn() as conn:
            await controls.resume(conn, "demo", None)
        after = await claim.held_back(s, WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=FRIDAY_NIGHT),
                                      FRIDAY_NIGHT)
    assert why is not None and why[1] == "paused: by erin"
    assert after is not None and after[1].startswith("inactive_hours: Fri 22:00")
