"""A busy slot's row names the wake that holds the agent's lease (its id, tier and trigger), not
the lease token; before that wake has its row, the process holding the lease (host:pid)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable

from ledgers import introspection
from ledgers.vocab import Status, Trigger
from tests.support import sessions
from wake.config import Config
from wake.context import WakeRequest
from wake.run import claim, session, settle
from wake.stores import lease


async def test_a_busy_slot_names_the_running_wake_then_the_process(store_config: Callable[..., Config]) -> None:
    config = store_config()
    slot = dt.datetime(2026, 11, 29, 9, tzinfo=dt.UTC)
    async with sessions.ready_stores(config) as st:
        s = session.Session(config=config, stores=st, registry=session.build_registry(config), models=None)
        other = await lease.acquire(st, "demo", ttl_ms=30_000, owner="box-7:4242")
        unrecorded = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=slot)
        assert await claim.run(s, unrecorded, owner="t", claim=claim.Claim(by="r1")) is None
        # the holder's wake now has its row, still `started`
        running = uuid.uuid4()
        started_at = dt.datetime(2026, 11, 29, 9, 14, 59, tzinfo=dt.UTC)
        async with st.pg_conn() as conn:
            await introspection.insert(conn, introspection.WakeRow(
                wake_id=running, agent_id="demo", tier="surface", trigger=Trigger.manual, scheduled_for=None, started_at=started_at,
                manifest_root="a" * 64, fence=other.fence, **settle.provenance(config),
            ), status=Status.started)
        recorded = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=slot + dt.timedelta(minutes=15))
        assert await claim.run(s, recorded, owner="t", claim=claim.Claim(by="r1")) is None
        await other.release()
        async with st.pg_conn() as conn:
            notes = [r["note"] for r in await conn.fetch(
                "SELECT note FROM wake_introspection_ledger WHERE status = 'skipped' ORDER BY scheduled_for")]
    head = "skipped: busy: another wake of the agent holds its lease"
    assert notes == [
        f"{head} (a wake not recorded yet, held by box-7:4242)",
        f"{head} (wake {running}, surface manual, started 2026-11-29T09:14:59Z)",
    ]
    assert other.token not in "".join(notes)  # the token's secret part is never echoed
