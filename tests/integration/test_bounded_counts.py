"""The counts beside an arrival's LIMIT are bounded (docs/performance.md, "Bounded counts"): a
per-wake query counts at most `COUNT_CAP` + 1 of the agent's rows, and a block says "more than
1000" past the cap, never a number it did not count. Up to the cap the count is exact."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from ledgers import memory_ledger, queries
from tests.support import sessions
from tests.support.ledger_ctx import wake_ctx
from wake import stores
from wake.arrival import falsifiers, records, settled
from wake.arrival import memory_render as memory_render
from wake.config import Config

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
CAP = queries.COUNT_CAP
OVER = CAP + 7  # more rows than the cap, and not cap + 1: a count that ran on would show 1007


@pytest.fixture
async def st(store_config: Callable[..., Config]) -> AsyncIterator[stores.Stores]:
    async with sessions.ready_stores(store_config()) as opened:
        yield opened


async def _daybook(conn: asyncpg.Connection, n: int, agent_id: str = "demo") -> None:
    await conn.execute(
        "INSERT INTO daybook (agent_id, entry, written_at) SELECT $1, 'entry ' || i, $2::timestamptz - i * interval '1 minute'"
        " FROM generate_series(1, $3) i", agent_id, NOW, n,
    )


async def _facts(conn: asyncpg.Connection, n: int, status: str, agent_id: str = "demo", *, minutes_ago: int = 0) -> None:
    await conn.execute(
        "INSERT INTO facts (agent_id, fact_key, fact_value, origin, status, recorded_at)"
        " SELECT $1, $4 || '.' || i, 'v' || i, 'did', $4, $2::timestamptz - ($5 + i) * interval '1 minute' FROM generate_series(1, $3) i",
        agent_id, NOW, n, status, minutes_ago,
    )


async def test_the_cap_is_exact_up_to_it_and_says_more_than_past_it(st: stores.Stores) -> None:
    ctx = wake_ctx(st.config, st, NOW)
    async with st.pg_conn() as conn:
        await _daybook(conn, CAP)  # exactly the cap: still exact
        at_cap = await records.recent_daybook(ctx)
        await _daybook(conn, OVER - CAP)
        over = await records.recent_daybook(ctx)
    assert at_cap.text.splitlines()[0].endswith(f"from your daybook (3 of {CAP} entries, newest first):")
    assert at_cap.rows == CAP
    assert over.text.splitlines()[0].endswith(f"from your daybook (3 of more than {CAP} entries, newest first):")
    assert str(OVER) not in over.text.splitlines()[0] and str(CAP + 1) not in over.text.splitlines()[0]
    assert over.rows == CAP + 1  # what it counted: the cap and one more, the sign that there are more


async def test_facts_past_the_cap(st: stores.Stores) -> None:
    ctx = wake_ctx(st.config, st, NOW)
    async with st.pg_conn() as conn:
        await _facts(conn, 2, "unverified")  # the newest two
        await _facts(conn, OVER, "active", minutes_ago=10)
        await _facts(conn, 5, "unverified", minutes_ago=10 + OVER)  # older than the newest 1000 facts
    found = await records.provenance_facts(ctx)
    head, *_, last = found.text.splitlines()
    assert head.startswith(f"Facts (12 of more than {CAP} active, newest first;"), head
    assert str(OVER) not in found.text and str(CAP + 1) not in found.text
    # the unverified ones are looked for among the newest 1000 facts only, and the block says so
    assert last == f"(2 unverified facts held back among your newest {CAP} facts: not attested by the message cited)"


async def test_settled_facts_posture_and_falsifiers_past_the_cap(st: stores.Stores) -> None:
    ctx = wake_ctx(st.config, st, NOW)
    async with st.pg_conn() as conn:
        await conn.execute(
            "INSERT INTO commitments (agent_id, title, created_at) SELECT 'demo', 'c' || i, $1::timestamptz - i * interval '1 minute'"
            " FROM generate_series(1, $2) i", NOW, OVER,
        )
        await conn.execute(
            "INSERT INTO last_actions (agent_id, surface, tool, summary, arguments, acted_at)"
            " SELECT 'demo', 'chat', 'add_commitment', 'a' || i, '{}'::jsonb, $1::timestamptz - i * interval '1 second'"
            " FROM generate_series(1, $2) i", NOW, OVER,
        )
    block = await settled.settled_facts(ctx)
    lines = {line.split(" (")[0]: line for line in block.text.splitlines()}
    assert lines["Open commitments"].startswith(f"Open commitments (3 of more than {CAP}, newest first): ")
    assert lines["Confirmed actions, last 48 h"].startswith(f"Confirmed actions, last 48 h (3 of more than {CAP}, newest first): ")
    assert str(OVER) not in block.text and str(CAP + 1) not in block.text
    text = falsifiers.render_due([], CAP + 1, {}, "UTC")
    assert text.startswith(f"more than {CAP} falsifiers are due (0 shown, oldest first).")
    assert queries.count_text(CAP) == str(CAP) and queries.count_text(CAP + 1) == f"more than {CAP}"


async def test_the_cloister_block_counts_open_findings_up_to_the_cap(st: stores.Stores) -> None:
    async with st.pg_conn() as conn:
        for severity, n in (("HALT", 3), ("WARN", OVER)):
            await conn.execute(
                "INSERT INTO cloister_findings (agent_id, severity, domain, path, commit_id, excerpt, rule, fingerprint, state, at)"
                " SELECT 'demo', $1, 'notes', 'notes/' || i || '.md', NULL, 'x', 'fields.changed', $1 || i, 'open',"
                " $2::timestamptz - i * interval '1 minute' FROM generate_series(1, $3) i", severity, NOW, n,
            )
        view = await memory_ledger.open_view(conn, "demo")
        exact = await memory_ledger.open_view(conn, "other")
    assert view.counts == {"HALT": 3, "WARN": queries.COUNT_READ, "LOG": 0} and len(view.rows) == memory_ledger.CLOISTER_SHOWN
    assert [r.severity for r in view.rows[:4]] == ["HALT", "HALT", "HALT", "WARN"]
    header = memory_render.cloister_block(view.rows, total=view.total, counts=view.counts).text.splitlines()[0]
    assert header.startswith(f"cloister: 3 HALT, more than {CAP} WARN, 0 LOG open (showing ") and header.endswith(f" of more than {CAP})")
    assert str(OVER) not in header and str(OVER + 3) not in header
    assert exact.counts == {"HALT": 0, "WARN": 0, "LOG": 0} and exact.rows == [] and exact.total == 0
