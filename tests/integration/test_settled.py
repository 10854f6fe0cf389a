"""The settled-facts block over real PostgreSQL (docs/design.md, "Lessons": the DATE that
shifted a day through UTC, the count that reported the LIMIT)."""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Callable

import asyncpg
import pytest

from ledgers import actions, commitments, retractions, settled
from tests.support import marked, pooler, sessions
from tests.support.ledger_ctx import wake_ctx
from wake.arrival import settled as settled_block
from wake.config import Config

UTC = dt.UTC
# 22:30 UTC on 22 October 2026 is 00:30 on 23 October in Stockholm (CEST, UTC+2).
AROUND_MIDNIGHT = dt.datetime(2026, 10, 22, 22, 30, tzinfo=UTC)


def _lines(text: str) -> dict[str, str]:
    return {line.split(":", 1)[0].split(" (")[0]: line for line in marked.plain(text).splitlines()[1:]}


async def _seed_commitments(conn: asyncpg.Connection, n: int, now: dt.datetime) -> list[int]:
    return [
        await commitments.add(conn, agent_id="demo", title=f"commitment {i}", due_on=dt.date(2026, 10, 23) if i == n - 1 else None,
                              created_at=now - dt.timedelta(hours=n - i))
        for i in range(n)
    ]


async def test_six_open_commitments_render_three_of_six(store_config: Callable[..., Config]) -> None:
    config = store_config()
    now = dt.datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            ids = await _seed_commitments(conn, 7, now)
            await commitments.complete(conn, agent_id="demo", commitment_id=ids[0], completed_at=now, outcome="done early")
            with pytest.raises(commitments.CommitmentError, match="already done"):
                await commitments.complete(conn, agent_id="demo", commitment_id=ids[0], completed_at=now)
        found = await settled_block.settled_facts(wake_ctx(config, st, now))
    line = _lines(found.text)["Open commitments"]
    assert line.startswith("Open commitments (3 of 6, newest first): ")
    assert f"#{ids[6]} commitment 6 (due 2026-10-23); #{ids[5]} commitment 5; #{ids[4]} commitment 4" in line
    assert "(3," not in line and "(3)" not in line
    assert found.text.splitlines()[0] == "[Settled Facts & Recent Ground Truth]"
    assert len(found.text.splitlines()) <= settled_block.MAX_LINES


async def test_dates_render_as_stored_with_the_connection_at_utc_plus_2_around_midnight(
    store_config: Callable[..., Config], pg_dsn: str
) -> None:
    if pooler.active():
        pytest.skip("a database's default time zone reaches only new server connections, and a transaction pooler's are already open")
    database = urllib.parse.urlsplit(pg_dsn).path.lstrip("/")
    admin = await asyncpg.connect(pg_dsn)
    try:
        await admin.execute(f"ALTER DATABASE {database} SET timezone TO 'Etc/GMT-2'")  # POSIX sign: UTC+2
    finally:
        await admin.close()
    config = store_config()  # agent demo: Europe/Stockholm
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            assert await conn.fetchval("SHOW timezone") == "Etc/GMT-2"
            await settled.record_state(conn, agent_id="demo", subject="timereport", state="reported: Kvällsskift 8 h",
                                       state_on=dt.date(2026, 10, 22), settled_at=AROUND_MIDNIGHT - dt.timedelta(minutes=40))
            await commitments.add(conn, agent_id="demo", title="send the timesheet", due_on=dt.date(2026, 10, 23), created_at=AROUND_MIDNIGHT)
            # The instrument can fail: the known bug (a local-midnight value converted to UTC) gives the day before.
            assert await conn.fetchval(
                "SELECT to_char(($1::date)::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD')", dt.date(2026, 10, 22),
            ) == "2026-10-21"
        found = await settled_block.settled_facts(wake_ctx(config, st, AROUND_MIDNIGHT))
    lines = _lines(found.text)
    assert lines["Settled state"] == "Settled state: 2026-10-22 timereport: reported: Kvällsskift 8 h"
    assert "(due 2026-10-23)" in lines["Open commitments"]
    assert "2026-10-21" not in found.text


async def test_actions_of_the_last_48_hours_with_the_exact_total(store_config: Callable[..., Config]) -> None:
    config = store_config()
    now = dt.datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            for hours in (1, 5, 20, 47, 49, 100):
                await actions.record(conn, agent_id="demo", surface="chat", tool="add_commitment", summary=f"{hours} hours ago",
                                     arguments={}, wake_id=None, fence=None, acted_at=now - dt.timedelta(hours=hours))
        found = await settled_block.settled_facts(wake_ctx(config, st, now))
    line = _lines(found.text)["Confirmed actions, last 48 h"]
    assert line.startswith("Confirmed actions, last 48 h (3 of 4, newest first): 2026-11-29 12:00 add_commitment on chat: 1 hours ago;")
    assert "49 hours" not in line and "47 hours" not in line  # outside the window / beyond the three shown


async def test_retractions_line_shows_the_newest_three_of_the_exact_total_dated_in_the_agents_zone(
    store_config: Callable[..., Config],
) -> None:
    config = store_config()
    now = dt.datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    async with sessions.ready_stores(config) as st:
        ctx = wake_ctx(config, st, now)
        empty = await settled_block.settled_facts(ctx)
        async with st.pg_conn() as conn:
            await conn.execute("SET TIME ZONE 'UTC'")
            for day in range(1, 6):
                # 23:30 UTC is 00:30 the next day in Stockholm: the agent's date, formatted in SQL
                await retractions.insert(conn, retractions.NewRetraction(
                    agent_id="demo", claim_verbatim=f"claim {day}", stood_on="memory", why_wrong="it was not so",
                    corrected_claim=f"correction {day}", caught_by="self", row_class="claim",
                    test_procedure="look again", expected_retraction_pass_obs="it is not so",
                    overturn_retraction_condition="it is so after all",
                    corrected_at=dt.datetime(2026, 10, 20 + day, 23, 30, tzinfo=UTC),
                ))
        full = await settled_block.settled_facts(ctx)
    assert _lines(empty.text)["Retractions"] == "Retractions: none"
    assert _lines(full.text)["Retractions"] == (
        'Retractions (3 of 5, newest first): 2026-10-26 claim 5 -> correction 5 (unchecked); '
        '2026-10-25 claim 4 -> correction 4 (unchecked); 2026-10-24 claim 3 -> correction 3 (unchecked)'
    )


SETTLED_SOURCE = '''
[sql_sources.timereport]
sql = "SELECT to_char(work_date, 'YYYY-MM-DD') AS work_date, shift FROM timereport_days WHERE agent = $1 ORDER BY work_date DESC"
params = ["agent_id"]
template = "{work_date} {shift}"
'''


async def test_settled_state_from_an_operator_source_and_a_failing_part_keeps_the_others(store_config: Callable[..., Config]) -> None:
    agents = "\n[agents.demo]\ntimezone = \"Europe/Stockholm\"\nsettled_state_source = \"timereport\"\n[agents.demo.tiers.full]\nbinds = [\"wake\"]\n"
    config = store_config(SETTLED_SOURCE, agents=agents)
    now = dt.datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    async with sessions.ready_stores(config) as st:
        ctx = wake_ctx(config, st, now)
        missing = await settled_block.settled_facts(ctx)  # the operator's table does not exist yet
        async with st.pg_conn() as conn:
            await conn.execute("CREATE TABLE timereport_days (agent text, work_date date, shift text)")
            await conn.execute("INSERT INTO timereport_days VALUES ('demo', '2026-11-27', 'Kvällsskift'), ('demo', '2026-11-28', 'Dagskift')")
            await _seed_commitments(conn, 2, now)
        found = await settled_block.settled_facts(ctx)
    assert _lines(missing.text)["Settled state"].startswith(
        "Settled state: could not check: SqlSourceError: sql source 'timereport' failed: UndefinedTableError"
    )
    assert _lines(missing.text)["Open commitments"] == "Open commitments: none"  # the other parts still ran
    assert _lines(found.text)["Settled state"] == "Settled state: 2026-11-28 Dagskift"
    assert _lines(found.text)["Open commitments"].startswith("Open commitments (2 of 2, newest first)")
