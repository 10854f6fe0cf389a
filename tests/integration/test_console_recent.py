"""The newest wakes as the console's timeline and agent page read them (`introspection.recent`,
issue 46): each filter combination reads the rows the one statement of optional filters read
before (`($1::text IS NULL OR agent_id = $1)`), through the pages and through the function, and a
tool's scoped connection still sees only its agent's; and at a seeded size each combination's
generic plan (the one a long-lived console keeps) reads an index in `started_at` order, never
sorting the ledger. Real PostgreSQL; counts and plan shapes, never timings."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from ledgers import introspection, queries
from wake import stores
from wake.config import Config
from wake.console import app, data, guard
from wake.stores import prepared

T0 = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
AGENTS = "".join(
    f'[agents.{a}]\ntimezone = "UTC"\n[agents.{a}.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\n'
    f'[agents.{a}.tiers.full]\nevery = "1h"\nbinds = ["wake"]\n'
    for a in ("alice", "bob")
)
# `introspection.recent`'s statement before migration 0029, the reference the rows are compared with
OLD_RECENT = """
SELECT wake_id FROM wake_introspection_ledger
 WHERE ($1::text IS NULL OR agent_id = $1) AND ($2::text IS NULL OR tier = $2)
   AND ($3::text IS NULL OR status = $3) AND ($5::text IS NULL OR trigger = $5)
 ORDER BY started_at DESC
 LIMIT $4
"""
# each filter's values: None (not given), values some rows hold, and one no row holds
VALUES: dict[str, tuple[str | None, ...]] = {
    "agent_id": (None, "alice", "bob"),
    "tier": (None, "whisper", "full", "surface"),
    "status": (None, "quiet", "failed", "aborted"),
    "trigger": (None, "schedule", "manual"),
}
SEEDED = 600  # rows for the comparisons
PLANNED = 20_000  # rows for the plans: enough that reading the ledger whole costs more than an index


async def _seed(conn: asyncpg.Connection, rows: int) -> None:
    """`rows` settled wakes, a minute apart, newest at T0: alice's and bob's (2:1), mixed tiers, statuses and triggers."""
    await conn.execute(
        """
        INSERT INTO wake_introspection_ledger (wake_id, agent_id, tier, trigger, scheduled_for, status, started_at, finished_at,
                                               manifest_root, host, pid, version, config_hash)
        SELECT gen_random_uuid(), (ARRAY['alice', 'alice', 'bob'])[1 + g % 3], (ARRAY['whisper', 'whisper', 'full'])[1 + g % 5 % 3],
               CASE WHEN g % 4 = 0 THEN 'manual' ELSE 'schedule' END,
               CASE WHEN g % 4 = 0 THEN NULL ELSE $1::timestamptz - g * interval '1 minute' END,
               (ARRAY['completed', 'quiet', 'quiet', 'failed', 'halted', 'skipped'])[1 + g % 7 % 6],
               $1::timestamptz - g * interval '1 minute', $1::timestamptz - g * interval '1 minute' + interval '2 seconds',
               repeat('a', 64), 'test', 1, '0', 'c'
          FROM generate_series(0, $2::int - 1) AS g
        """,
        T0, rows,
    )
    await conn.execute("ANALYZE wake_introspection_ledger")


def _combinations() -> Iterator[dict[str, str | None]]:
    for values in itertools.product(*VALUES.values()):
        yield dict(zip(VALUES, values, strict=True))


async def _before(conn: asyncpg.Connection, filters: dict[str, str | None], limit: int) -> list[str]:
    f = filters
    rows = await conn.fetch(OLD_RECENT, f.get("agent_id"), f.get("tier"), f.get("status"), limit, f.get("trigger"))
    return [str(r["wake_id"]) for r in rows]


def _shown(html: str) -> list[str]:
    return re.findall(r'<tr data-wake="([0-9a-f-]{36})"', html)


@pytest.fixture
async def seeded(store_config: Callable[..., Config]) -> AsyncIterator[tuple[Config, stores.Stores]]:
    config = store_config(agents=AGENTS)
    async with stores.connected(config, neo4j=False) as st:
        await prepared.prepare_schema(st)
        async with st.pg_conn() as conn:
            await _seed(conn, SEEDED)
        yield config, st


async def test_every_filter_combination_reads_the_rows_it_read_before_on_the_pages_and_in_the_function(
    seeded: tuple[Config, stores.Stores],
) -> None:
    config, st = seeded
    console = app.Console(config=lambda: config, stores=st, guard=guard.Guard(token=None, loopback=True, read_only=True, token_source="-"))
    compared = nonempty = 0
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app.build(console)), base_url="http://localhost") as http:
        async with st.pg_conn() as conn:
            for filters in _combinations():
                given = {k: v for k, v in filters.items() if v is not None}
                before = await _before(conn, filters, 50)
                assert [str(w.wake_id) for w in await introspection.recent(conn, limit=50, **given)] == before, filters
                query = {"agent" if k == "agent_id" else k: v for k, v in given.items()}
                answer = await http.get("/", params={**query, "limit": "50"})
                assert answer.status_code == 200, (filters, answer.text[:300])
                assert _shown(answer.text) == before, filters
                compared += 1
                nonempty += bool(before)
            for agent in ("alice", "bob"):
                answer = await http.get(f"/agents/{agent}")
                assert answer.status_code == 200, answer.text[:300]
                assert _shown(answer.text) == await _before(conn, {"agent_id": agent}, data.AGENT_LISTED)
            timeline = await http.get("/")
            assert _shown(timeline.text) == await _before(conn, {}, data.TIMELINE_LIMIT)
    assert compared == 3 * 4 * 4 * 3 and nonempty > compared // 2  # most combinations select some rows, a few none


async def test_a_tools_scoped_connection_reads_only_its_agents_newest_wakes(seeded: tuple[Config, stores.Stores]) -> None:
    _, st = seeded
    async with st.pg_conn() as conn:
        alice = [str(r["wake_id"]) for r in await conn.fetch(
            "SELECT wake_id FROM wake_introspection_ledger WHERE agent_id = 'alice' ORDER BY started_at DESC LIMIT 40")]
    async with st.scoped_conn("alice") as scoped:
        assert [str(w.wake_id) for w in await introspection.recent(scoped, limit=40)] == alice
        assert [str(w.wake_id) for w in await introspection.recent(scoped, agent_id="alice", limit=40)] == alice
        assert await introspection.recent(scoped, agent_id="bob", limit=40) == []


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


async def _generic_plan(conn: asyncpg.Connection, sql: str, args: list[Any]) -> list[dict[str, Any]]:
    """The plan PostgreSQL keeps for `sql` once it settles on a generic one (as after five runs)."""
    await conn.execute(f"PREPARE probe AS {sql}")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    try:
        literals = ", ".join("NULL" if a is None else f"'{a}'" if isinstance(a, str) else str(a) for a in args)
        explained = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE probe({literals})")
        return list(_nodes(json.loads(explained)[0]["Plan"]))
    finally:
        await conn.execute("RESET plan_cache_mode")
        await conn.execute("DEALLOCATE probe")


async def test_each_filter_combinations_generic_plan_reads_an_index_in_order_at_a_seeded_size(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _seed(conn, PLANNED)
        checked = 0
        for n in range(len(VALUES) + 1):
            for columns in itertools.combinations(VALUES, n):
                sql = queries.filtered(introspection._sql("recent"), columns, 2)
                nodes = await _generic_plan(conn, sql, [data.TIMELINE_LIMIT, *(VALUES[c][1] for c in columns)])
                kinds = [node["Node Type"] for node in nodes]
                assert "Sort" not in kinds and "Seq Scan" not in kinds, (columns, kinds)
                scans = [node for node in nodes if node["Node Type"] in ("Index Scan", "Index Only Scan")]
                assert [s["Relation Name"] for s in scans] == ["wake_introspection_ledger"], (columns, kinds)
                checked += 1
        assert checked == 16
        # the timeline (no filter) walks the started_at index of migration 0029 and stops at its limit
        timeline = await _generic_plan(conn, queries.filtered(introspection._sql("recent"), (), 2), [data.TIMELINE_LIMIT])
        assert [n["Node Type"] for n in timeline] == ["Limit", "Index Scan"]
        assert timeline[1]["Index Name"] == "wake_introspection_recent" and timeline[1]["Scan Direction"] == "Forward"
    finally:
        await conn.close()
