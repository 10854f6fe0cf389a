"""The wake ledger as evidence, over real PostgreSQL and Redis: the content store behind every hash,
the per-agent hash chain, `missed` rows for slots PostgreSQL was away for, a stale fence that is
an outcome and not a crash, and the status vocabulary against the live CHECK."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import structlog

from ledgers import fences, introspection, slots
from ledgers.vocab import Status
from tests.support import agents, daemons, sessions, wakes
from wake import clock, stores
from wake.cli import render
from wake.config import Config
from wake.context import WakeRequest
from wake.daemon import service as daemon
from wake.run import cycle, session, unrun
from wake.witness import manifest

AGENTS = agents.toml(tiers={
    "whisper": 'every = "15m"\nbinds = ["wake.whisper"]',
})


@pytest.fixture
async def opened(store_config: Callable[..., Config]) -> AsyncIterator[stores.Stores]:
    config = store_config("[daemon]\nlease_ttl_s = 5\n", agents=AGENTS)
    async with sessions.ready_stores(config) as st:
        yield st


async def _wake(st: stores.Stores, **request: Any) -> cycle.WakeOutcome:
    return await wakes.run(st.config, st, session.build_registry(st.config), agent_id="demo", tier="whisper", **request)


async def _row(st: stores.Stores, wake_id: uuid.UUID) -> introspection.WakeRecord:
    async with st.pg_conn() as conn:
        row = await introspection.get(conn, wake_id)
    assert row is not None
    return row


async def _audit(st: stores.Stores, wake_id: uuid.UUID) -> list[manifest.Difference]:
    row = await _row(st, wake_id)
    async with st.pg_conn() as conn:
        stored = await introspection.contents(conn, [b["hash"] for b in row.blocks.values()] + list(row.tool_hashes.values()))
    _, found = manifest.audit(row.agent_id, row.tier, {n: b["hash"] for n, b in row.blocks.items()}, row.tool_hashes,
                              row.manifest_root, list(row.active_tool_names), stored)
    return found


async def _chain(st: stores.Stores) -> introspection.ChainCheck:
    async with st.pg_conn() as conn:
        return introspection.walk("demo", await introspection.chain_rows(conn, "demo"), await introspection.chain_head(conn, "demo"))


async def test_each_text_is_stored_once_and_the_arrival_comes_back_exactly(opened: stores.Stores) -> None:
    outcomes = [await _wake(opened) for _ in range(3)]
    async with opened.pg_conn() as conn:
        rows = [await introspection.get(conn, o.wake_id) for o in outcomes]
        stored = await conn.fetchval("SELECT count(*) FROM manifest_contents")
        arrivals = [await introspection.arrival(conn, o.wake_id) for o in outcomes]
    hashes = {b["hash"] for r in rows if r for b in r.blocks.values()} | {h for r in rows if r for h in r.tool_hashes.values()}
    per_wake = len(outcomes[0].blocks) + len(outcomes[0].binding)
    assert stored == len(hashes) < 3 * per_wake  # shared across wakes: only what changed is stored again
    for outcome, blocks in zip(outcomes, arrivals, strict=True):
        assert render.arrival(blocks) == outcome.prompt  # `wake show --arrival` is the prompt the wake saw
    assert all(not found for found in [await _audit(opened, o.wake_id) for o in outcomes])


async def test_verify_names_a_changed_block_hash_a_changed_text_and_a_changed_tool(opened: stores.Stores) -> None:
    outcome = await _wake(opened)
    row = await _row(opened, outcome.wake_id)
    first, second = sorted(row.blocks)[:2]
    tool = sorted(row.tool_hashes)[0]
    async with opened.pg_conn() as conn:
        await conn.execute("UPDATE wake_introspection_ledger SET blocks = jsonb_set(blocks, $2, to_jsonb($3::text)) WHERE wake_id = $1",
                           outcome.wake_id, [first, "hash"], "a" * 64)
        await conn.execute("UPDATE manifest_contents SET body = body || ' (edited)' WHERE sha256 = $1", row.blocks[second]["hash"])
        await conn.execute("UPDATE manifest_contents SET body = $2 WHERE sha256 = $1", row.tool_hashes[tool],
                           manifest.canonical({"name": "another_tool", "description": "", "parameters": {}, "version": "1"}).decode())
    found = {d.part: d.detail for d in await _audit(opened, outcome.wake_id)}
    assert set(found) == {f"block {first}", f"block {second}", f"tool {tool}", "root"}
    assert found[f"block {first}"].startswith("no stored block has the row's hash " + "a" * 64)
    assert found[f"block {second}"].endswith("the content was changed")
    assert "hashes to" in found[f"tool {tool}"]


async def test_the_chain_links_every_settled_row_and_the_log_holds_the_head(opened: stores.Stores) -> None:
    with structlog.testing.capture_logs() as logged:
        ran = [await _wake(opened) for _ in range(3)]
    request = WakeRequest(agent_id="demo", tier="whisper", trigger="schedule", scheduled_for=dt.datetime(2026, 11, 29, 9, tzinfo=dt.UTC))
    s = session.Session(config=opened.config, stores=opened, registry=session.build_registry(opened.config))
    await unrun.write(s, unrun.NotRun.of(request, Status.skipped, "busy: another wake of the agent holds its lease (x:1)", at=clock.now()))
    check = await _chain(opened)
    assert check.why is None and check.rows == 4 and check.head is not None and check.head[0] == 4
    chains = [e["chain"] for e in logged if e["event"] == "wake.settled"]
    assert chains == [(await _row(opened, o.wake_id)).chain for o in ran]  # journald's copy of each link
    async with opened.pg_conn() as conn:
        linked = await introspection.chain_rows(conn, "demo")
    assert [r.chain_seq for r in linked] == [1, 2, 3, 4] and linked[-1].chain == check.head[1]
    previous = introspection.GENESIS
    for r in linked:
        assert r.chain == introspection.chain_of(previous, r.manifest_root)
        previous = r.chain


async def test_a_consistently_rewritten_row_passes_verify_and_breaks_the_chain_there(opened: stores.Stores) -> None:
    ran = [await _wake(opened) for _ in range(3)]
    victim = await _row(opened, ran[1].wake_id)
    dropped = sorted(victim.tool_hashes)[0]
    tools = {n: h for n, h in victim.tool_hashes.items() if n != dropped}
    blocks = {n: b["hash"] for n, b in victim.blocks.items()}
    root = manifest.root_hash("demo", "whisper", blocks, tools)
    async with opened.pg_conn() as conn:  # the tool list, its hashes, the count and the root, all consistent
        await conn.execute(
            "UPDATE wake_introspection_ledger SET tool_hashes = $2::jsonb, active_tool_names = $3, active_tools_count = $4,"
            " manifest_root = $5 WHERE wake_id = $1",
            victim.wake_id, json.dumps(tools), sorted(tools), len(tools), root,
        )
    assert await _audit(opened, victim.wake_id) == []  # every part agrees with every other: verify alone says OK
    check = await _chain(opened)
    assert check.broken is not None and check.broken.wake_id == victim.wake_id and check.broken.chain_seq == 2
    assert "its root and the link before it give" in (check.why or "")
    lines = render.chain_lines([check])
    assert lines[0].startswith("demo: BROKEN") and str(victim.wake_id) in lines[1]


async def test_a_removed_row_breaks_the_chain_at_the_next(opened: stores.Stores) -> None:
    ran = [await _wake(opened) for _ in range(3)]
    async with opened.pg_conn() as conn:
        await conn.execute("DELETE FROM wake_introspection_ledger WHERE wake_id = $1", ran[1].wake_id)
    check = await _chain(opened)
    assert check.broken is not None and check.broken.wake_id == ran[2].wake_id
    assert check.why == "link 2 is missing: the row before this one was removed or renumbered"
    async with opened.pg_conn() as conn:
        await conn.execute("DELETE FROM wake_introspection_ledger WHERE wake_id = $1", ran[2].wake_id)
    tail = await _chain(opened)  # the last rows removed: the head still names the link they ended at
    assert tail.broken is None and tail.why is not None and tail.why.startswith("the chain head is link 3")


async def test_a_stale_fence_is_an_outcome_logged_once_without_a_traceback(opened: stores.Stores) -> None:
    async with opened.pg_conn() as conn:
        await fences.advance(conn, "demo", 7)  # a newer lease holder exists
    with structlog.testing.capture_logs() as logged:
        outcome = await _wake(opened, fence=3)
    assert outcome.status == Status.failed and not outcome.recorded and outcome.error is not None and "stale fence" in outcome.error
    assert [e["event"] for e in logged].count("fence.stale") == 1
    assert not [e for e in logged if e["event"] == "wake.failed" or "exc_info" in e or "exception" in e]
    assert [e["error"] for e in logged if e["event"] == "wake.settled"] == [outcome.error]


async def test_vocab_status_is_the_live_check(opened: stores.Stores) -> None:
    async with opened.pg_conn() as conn:
        definition = await conn.fetchval(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'wake_introspection_ledger'::regclass AND conname = 'wake_introspection_status'"
        )
    assert {s.value for s in Status} == set(re.findall(r"'([a-z_]+)'::text", definition))


# -- PostgreSQL away ------------------------------------------------------------------------------


def _daemon(st: stores.Stores) -> daemon.Daemon:
    return daemons.in_process(session.Session(config=st.config, stores=st, registry=session.build_registry(st.config)))


async def test_slots_postgres_was_away_for_are_recorded_missed_once_across_replicas(opened: stores.Stores, tmp_path: Path) -> None:
    """PostgreSQL "stopped": a pool whose server socket is gone, as for an embedded server that is down."""
    gone = await asyncpg.create_pool(f"postgresql://postgres@/wake?host={tmp_path / 'stopped'}", min_size=0, max_size=2, timeout=5)
    away = dataclasses.replace(opened, pg=gone, pg_address="postgresql://postgres@/wake (stopped)")
    a, b = _daemon(opened), _daemon(opened)
    whisper = a.schedules[("demo", "whisper")]
    slots_due = [dt.datetime(2026, 11, 29, 9, tzinfo=dt.UTC) + dt.timedelta(minutes=15 * i) for i in range(3)]
    try:
        a.stores, b.stores = away, away
        with structlog.testing.capture_logs() as logged:
            for slot in slots_due:  # both replicas fire every slot during the outage
                await a.run_slot(whisper, slot, "schedule")
                await b.run_slot(whisper, slot, "schedule")
        spooled = [e for e in logged if e["event"] == "slot.spooled"]
        assert len(spooled) == 6 and len(a.spool) == len(b.spool) == 3
        assert all(e["error"].startswith("postgres unreachable at postgresql://postgres@/wake (stopped): FileNotFoundError") for e in spooled)
        assert not [e for e in logged if e["event"] == "daemon.task_failed"]
        assert await a.spool.flush(a.session) == 3  # still away: kept
    finally:
        a.stores, b.stores = opened, opened
        await gone.close()
    async with opened.pg_conn() as conn:
        assert await introspection.recent(conn) == []  # nothing was written meanwhile
    assert await b.spool.flush(b.session) == 0 and await a.spool.flush(a.session) == 0
    async with opened.pg_conn() as conn:
        rows = sorted(await introspection.recent(conn, limit=100), key=lambda r: r.scheduled_for)
        claims = [await slots.holder(conn, "demo", "whisper", s) for s in slots_due]
    assert [(r.scheduled_for, r.status, r.trigger) for r in rows] == [(s, "missed", "schedule") for s in slots_due]
    assert all(r.note.startswith("missed: store_unreachable: postgres unreachable from ") for r in rows)
    assert all("the slot was not run" in r.note and "FileNotFoundError" in r.error for r in rows)
    assert [c.wake_id if c else None for c in claims] == [r.wake_id for r in rows]  # the claim decided: one row each
    assert {c.claimed_by for c in claims if c} == {b.replica_id}
    assert (await _chain(opened)).rows == 3
