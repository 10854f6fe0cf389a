"""last_actions: the total is the exact count of matching rows, never the LIMIT."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from ledgers import actions
from tests.support import sessions
from wake.config import Config

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


async def test_since_reports_the_exact_total_and_newest_first(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            for hours_ago in (1, 2, 3, 4, 5, 72):
                await actions.record(
                    conn, agent_id="demo", surface="wake.surface", tool="add_commitment", summary=f"{hours_ago}h ago",
                    arguments={"n": hours_ago}, wake_id=None, fence=None, acted_at=NOW - dt.timedelta(hours=hours_ago),
                )
            rows, total = await actions.since(conn, "demo", NOW - dt.timedelta(hours=48), limit=3)
            assert total == 5
            assert [r.summary for r in rows] == ["1h ago", "2h ago", "3h ago"]
            assert rows[0].arguments == {"n": 1}
            assert await actions.since(conn, "other", NOW - dt.timedelta(hours=48), limit=3) == ([], 0)
