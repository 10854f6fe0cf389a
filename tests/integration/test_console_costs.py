"""The cost per local day the console's timeline shows (`console_reads.daily_costs`), against real
PostgreSQL: for wakes drawn around daylight-saving changes in zones whose days are 23, 24, 25 or
23.5 hours, every day's wakes, thought wakes, cost and tokens are the ones Python's zoneinfo puts
on that local day, the days newest first and none without a wake; and the read is an index-only
scan of migration 0030's index, never a read of the ledger's wide rows."""

from __future__ import annotations

import datetime as dt
import json
import uuid
import zoneinfo
from collections import defaultdict
from decimal import Decimal

import asyncpg
from hypothesis import given
from hypothesis import strategies as st

from ledgers import console_reads

# zones with a 1-hour DST change each way, none, a 30-minute one (Lord Howe) and a date-line one (Apia, 2011)
ZONES = ("Europe/Stockholm", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "UTC", "Pacific/Apia")
# instants near changes: Stockholm's and New York's autumn and spring, Lord Howe's spring, Apia's skipped day
AROUND = (
    dt.datetime(2026, 10, 25, 1, 0, tzinfo=dt.UTC), dt.datetime(2026, 3, 29, 1, 0, tzinfo=dt.UTC),
    dt.datetime(2026, 11, 1, 6, 0, tzinfo=dt.UTC), dt.datetime(2026, 3, 8, 7, 0, tzinfo=dt.UTC),
    dt.datetime(2026, 10, 3, 15, 30, tzinfo=dt.UTC), dt.datetime(2011, 12, 30, 10, 0, tzinfo=dt.UTC),
)

wakes = st.lists(
    st.tuples(
        st.integers(min_value=-4 * 86_400, max_value=4 * 86_400),  # seconds from the change
        st.sampled_from(["alice", "bob"]),
        st.one_of(st.none(), st.sampled_from(["m1", "m2"])),  # the model: None, a wake that did not think
        st.decimals(min_value=0, max_value=2, places=6),
        st.integers(min_value=0, max_value=5000), st.integers(min_value=0, max_value=900),
    ),
    max_size=40,
)


async def _insert(conn: asyncpg.Connection, around: dt.datetime, drawn: list[tuple[int, str, str | None, Decimal, int, int]]) -> None:
    await conn.execute("DELETE FROM wake_introspection_ledger")
    await conn.executemany(
        """
        INSERT INTO wake_introspection_ledger (wake_id, agent_id, tier, trigger, status, started_at, finished_at,
                                               manifest_root, host, pid, version, config_hash,
                                               model, cost_usd, prompt_tokens, completion_tokens)
        VALUES ($1, $2, 'whisper', 'manual', 'completed', $3, $3, repeat('a', 64), 'test', 1, '0', 'c', $4, $5, $6, $7)
        """,
        [(uuid.uuid4(), agent, around + dt.timedelta(seconds=s), model, cost, p, c) for s, agent, model, cost, p, c in drawn],
    )


def _expected(around: dt.datetime, drawn: list[tuple[int, str, str | None, Decimal, int, int]], agent: str, zone: str,
              since: dt.datetime) -> list[tuple[str, int, int, Decimal, int, int]]:
    days: dict[str, list[object]] = defaultdict(lambda: [0, 0, Decimal(0), 0, 0])
    for s, who, model, cost, p, c in drawn:
        at = around + dt.timedelta(seconds=s)
        if who != agent or at < since:
            continue
        d = days[at.astimezone(zoneinfo.ZoneInfo(zone)).strftime("%Y-%m-%d")]
        d[0], d[1], d[2], d[3], d[4] = d[0] + 1, d[1] + (model is not None), d[2] + cost, d[3] + p, d[4] + c  # type: ignore[operator]
    return [(day, *v) for day, v in sorted(days.items(), reverse=True)]  # type: ignore[misc]


@given(
    drawn=wakes, zone=st.sampled_from(ZONES), change=st.sampled_from(AROUND),
    since_s=st.integers(min_value=-5 * 86_400, max_value=5 * 86_400),
)
async def test_each_local_day_holds_the_wakes_zoneinfo_puts_on_it_across_dst_changes(
    conn: asyncpg.Connection, drawn: list[tuple[int, str, str | None, Decimal, int, int]], zone: str, change: dt.datetime, since_s: int,
) -> None:
    await _insert(conn, change, drawn)
    since = change + dt.timedelta(seconds=since_s)
    got = await console_reads.daily_costs(conn, "alice", zone, since)
    assert [(d.day, d.wakes, d.thought, Decimal(d.cost_usd), d.prompt_tokens, d.completion_tokens) for d in got] == \
        _expected(change, drawn, "alice", zone, since)
    assert all(d.agent_id == "alice" for d in got)


async def _seed_month(conn: asyncpg.Connection, now: dt.datetime) -> None:
    """20,001 wakes of alice and bob, one every 37 s back from `now`, two in three thought."""
    await conn.execute(
        """
        INSERT INTO wake_introspection_ledger (wake_id, agent_id, tier, trigger, status, started_at, finished_at,
                                               manifest_root, host, pid, version, config_hash, model, cost_usd)
        SELECT gen_random_uuid(), (ARRAY['alice', 'bob'])[1 + g % 2], 'whisper', 'manual', 'completed',
               $1::timestamptz - g * interval '37 seconds', $1::timestamptz - g * interval '37 seconds', repeat('a', 64),
               'test', 1, '0', 'c', CASE WHEN g % 3 = 0 THEN NULL ELSE 'm' END, 0.001
          FROM generate_series(0, 20000) AS g
        """,
        now,
    )


async def test_the_read_is_an_index_only_scan_of_the_cost_index(conn: asyncpg.Connection) -> None:
    now = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
    # Committed synchronously: a page whose rows' commit is not flushed yet is never marked
    # all-visible, and the external test server runs with synchronous_commit off (a production
    # server's default is on, and autovacuum comes back to the pages later either way).
    async with conn.transaction():
        await conn.execute("SET LOCAL synchronous_commit = on")
        await _seed_month(conn, now)
    await conn.execute("VACUUM ANALYZE wake_introspection_ledger")
    sql = console_reads._sql("daily_costs")
    plan = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", "alice", "Europe/Stockholm", now - dt.timedelta(days=7)))

    def nodes(node: dict[str, object]) -> list[dict[str, object]]:
        return [node, *(n for child in node.get("Plans", []) for n in nodes(child))]  # type: ignore[union-attr, arg-type, attr-defined]

    ledger_reads = [n for n in nodes(plan[0]["Plan"]) if n.get("Relation Name") == "wake_introspection_ledger"]
    assert ledger_reads and all(
        n["Node Type"] == "Index Only Scan" and n["Index Name"] in ("wake_introspection_agent_costs", "wake_introspection_agent_recent")
        for n in ledger_reads
    ), [(n["Node Type"], n.get("Index Name")) for n in ledger_reads]
    assert any(n["Index Name"] == "wake_introspection_agent_costs" for n in ledger_reads)
    days = await console_reads.daily_costs(conn, "alice", "Europe/Stockholm", now - dt.timedelta(days=7))
    assert sum(d.wakes for d in days) == sum(1 for g in range(20001) if g % 2 == 1 and g * 37 <= 7 * 86_400)
