"""The retraction ledger, claim-probe records, the due_falsifiers block and the epistemic tools over
real PostgreSQL and Redis."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from ledgers import introspection, probes, queries, retractions
from ledgers.errors import RetractionInputError, StaleFence
from surfaces import epistemic_tools, loader
from surfaces.errors import ToolInputError
from tests.support import ledger_ctx, wakes
from wake import stores
from wake.arrival import sources
from wake.config import Config
from wake.run import cycle
from wake.stores import lease, prepared

NOW = dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC)
PROBES = '[probes]\nroots = ["probe-root"]\n'


def fields(**over: Any) -> dict[str, Any]:
    base = {
        "claim_verbatim": "Worker 013b4306 left no artifacts dir on disk at all.",
        "stood_on": "A narrative summary.",
        "why_wrong": "Copied from the summary, not read from disk.",
        "corrected_claim": "Worker 013b4306 left artifacts/probe.txt.",
        "test_procedure": "List the artifacts dir.",
        "expected_retraction_pass_obs": "probe.txt is there.",
        "overturn_retraction_condition": "There is no probe.txt.",
    }
    return {**base, **over}


def new(agent: str = "demo", corrected_at: dt.datetime = NOW, **over: Any) -> retractions.NewRetraction:
    return retractions.NewRetraction(agent_id=agent, corrected_at=corrected_at, **fields(**over))


def ctx_for(config: Config, st: stores.Stores, *, now: dt.datetime = NOW, fence: int | None = None, tier: str = "surface") -> cycle.WakeContext:
    return ledger_ctx.wake_ctx(config, st, now, tier=tier, fence=fence)


async def _open(config: Config) -> stores.Stores:
    st = await stores.open_stores(config, neo4j=False)
    await prepared.prepare_schema(st)
    return st


# -- the ledger --------------------------------------------------------------------------------


async def test_the_polarity_check_refuses_the_same_observation_twice(store_config: Callable[..., Config]) -> None:
    st = await _open(store_config())
    try:
        async with st.pg_conn() as conn:
            with pytest.raises(RetractionInputError, match="same observation"):
                await retractions.insert(conn, new(overturn_retraction_condition="  PROBE.TXT   is there. "))
            # the schema refuses it too, whatever the code does: case, edge and inner whitespace
            insert = queries.load("retractions")["insert"]
            args = [uuid.uuid4(), "demo", "c", "s", "w", "k", "self", "claim", "t", "Probe.txt is  there", "  probe.txt IS there ",
                    NOW, None, None, None, False, 3, None]
            with pytest.raises(asyncpg.CheckViolationError) as refused:
                await conn.execute(insert, *args)
            assert refused.value.constraint_name == "retraction_polarity_distinct"
            args[10] = "no probe.txt"
            await conn.execute(insert, *args)
            assert await conn.fetchval("SELECT COUNT(*) FROM retraction_ledger") == 1
    finally:
        await st.close()


async def test_schema_checks_on_settling_and_probes(store_config: Callable[..., Config]) -> None:
    st = await _open(store_config())
    try:
        async with st.pg_conn() as conn:
            row_id = await retractions.insert(conn, new())
            with pytest.raises(asyncpg.CheckViolationError):  # a verdict without a check time
                await conn.execute("UPDATE retraction_ledger SET verdict = 'upheld', falsifier_outcome = 'x' WHERE id = $1", row_id)
            with pytest.raises(asyncpg.CheckViolationError):  # a needle without mode contains
                await conn.execute("UPDATE retraction_ledger SET probe_target = 'a', probe_mode = 'exists', probe_needle = 'x' WHERE id = $1", row_id)
            with pytest.raises(asyncpg.CheckViolationError):  # negate without mode contains
                await conn.execute("UPDATE retraction_ledger SET probe_negate = true WHERE id = $1", row_id)
            record = probes.ProbeRecord(agent_id="demo", target="a", resolved_path=None, mode="exists", needle=None, negate=False,
                                        verdict="verified", evidence={}, instrument_state="failed", checked_at=NOW)
            with pytest.raises(asyncpg.CheckViolationError) as refused:  # an untrusted instrument reports error only
                await probes.insert(conn, record)
            assert refused.value.constraint_name == "claim_probe_untrusted_is_error"
    finally:
        await st.close()


async def test_falsifiers_mature_and_are_due_until_settled(store_config: Callable[..., Config]) -> None:
    st = await _open(store_config())
    try:
        async with st.pg_conn() as conn:
            old = await retractions.insert(conn, new(corrected_at=NOW - dt.timedelta(days=3)))  # matures exactly now
            young = await retractions.insert(conn, new(corrected_at=NOW - dt.timedelta(days=2, hours=23)))
            quick = await retractions.insert(conn, new(corrected_at=NOW - dt.timedelta(hours=1)), maturity_days=0)
            await retractions.insert(conn, new(agent="other", corrected_at=NOW - dt.timedelta(days=10)))
            row = await retractions.get(conn, old)
            assert row is not None and row.matures_at == NOW and row.verdict == "unchecked"
            assert row.caught_by == "self" and row.row_class == "claim"

            due, _ = await retractions.due(conn, "demo", NOW, 10)
            assert [r.id for r in due] == [quick, old]  # oldest maturity first
            assert (await retractions.due(conn, "demo", NOW, 10))[1] == 2
            assert (await retractions.due(conn, "demo", NOW + dt.timedelta(hours=1), 10))[1] == 3
            assert [r.id for r in (await retractions.due(conn, "demo", NOW, 1))[0]] == [quick]  # the page, not the count
            rows, total = await retractions.listing(conn, agent_id="demo", due_at=NOW, limit=1)
            assert len(rows) == 1 and total == 2
            rows, total = await retractions.listing(conn, agent_id=None, due_at=None, limit=10)
            assert total == 4 and rows[0].id == quick  # newest correction first

            settled = await retractions.settle(conn, old, "demo", verdict="overturned", outcome="probe.txt is there, 17 bytes",
                                               checked_at=NOW + dt.timedelta(minutes=5))
            assert settled.verdict == "overturned" and settled.falsifier_checked_at == NOW + dt.timedelta(minutes=5)
            row = await retractions.get(conn, old)
            assert row is not None and row.falsifier_outcome == "probe.txt is there, 17 bytes"
            assert [r.id for r in (await retractions.due(conn, "demo", NOW + dt.timedelta(days=1), 10))[0]] == [quick, young]

            with pytest.raises(RetractionInputError, match="already settled as overturned"):
                await retractions.settle(conn, old, "demo", verdict="upheld", outcome="x", checked_at=NOW)
            with pytest.raises(RetractionInputError, match="verdict must be one of"):
                await retractions.settle(conn, young, "demo", verdict="unchecked", outcome="x", checked_at=NOW)
            with pytest.raises(RetractionInputError, match="outcome is required"):
                await retractions.settle(conn, young, "demo", verdict="upheld", outcome="  ", checked_at=NOW)
            with pytest.raises(RetractionInputError, match="no retraction"):
                await retractions.settle(conn, young, "other", verdict="upheld", outcome="x", checked_at=NOW)
            with pytest.raises(RetractionInputError, match=r"is not due until 2026-\d\d-\d\d \d\d:\d\d"):
                await retractions.settle(conn, young, "demo", verdict="upheld", outcome="too early", checked_at=NOW)
            young_row = await retractions.get(conn, young)
            assert young_row is not None and young_row.verdict == "unchecked"
    finally:
        await st.close()


async def test_maturity_days_come_from_config(store_config: Callable[..., Config]) -> None:
    config = store_config("[retractions]\nfalsifier_maturity_days = 7\n")
    st = await _open(config)
    try:
        ctx = ctx_for(config, st)
        out = await epistemic_tools.retract.handler(ctx, **fields())
        assert dt.datetime.fromisoformat(out["matures_at"]) == NOW + dt.timedelta(days=7)
    finally:
        await st.close()


# -- the arrival block -------------------------------------------------------------------------


async def _due_wake(config: Config, st: stores.Stores, now: dt.datetime, *, dry_run: bool = True) -> cycle.WakeOutcome:
    registry = loader.build(entry_points=False)
    return await wakes.run(config, st, registry, agent_id="demo", tier="whisper", dry_run=dry_run,
                           now=lambda: now, source_list=[sources.BUILTIN["due_falsifiers"]])


async def _due_block(config: Config, st: stores.Stores, now: dt.datetime, *, dry_run: bool = True) -> Any:
    (block,) = (await _due_wake(config, st, now, dry_run=dry_run)).blocks
    return block


async def test_the_due_block_shows_what_the_harness_probe_found(store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config(PROBES)
    root = tmp_path / "probe-root"
    st = await _open(config)
    try:
        async with st.pg_conn() as conn:
            await retractions.seed_demo(conn, "demo", NOW, root)
            await retractions.seed_demo(conn, "demo", NOW, root)  # idempotent
            wrong = await retractions.insert(conn, new(corrected_at=NOW - dt.timedelta(days=5), probe_target="gone.txt", probe_mode="exists",
                                                       expected_retraction_pass_obs="gone.txt exists"))
            await retractions.insert(conn, new(corrected_at=NOW - dt.timedelta(days=4)))  # no probe
            await retractions.insert(conn, new(corrected_at=NOW))  # not due yet
        block = await _due_block(config, st, NOW, dry_run=False)
        assert block.retrieval == "ok" and block.result == "present" and block.rows == 3
        text = block.text
        assert text.startswith("3 falsifiers are due.")
        assert "harness probe of the pass observation (workers/013b4306/artifacts/probe.txt contains 'HARNESS PROBE OK'): " \
               "verified, 1 match, 17 bytes; controls passed" in text
        assert "harness probe of the pass observation (gone.txt exists): falsified" in text and "the target does not exist" in text
        assert "no machine-checkable probe is attached" in text
        assert "retraction stands (overturned) if: probe.txt is on disk" in text
        assert "original restored (upheld) if: There is no probe.txt" in text
        # the harness's probes left their rows, tied to the retraction and the wake
        async with st.pg_conn() as conn:
            records = await probes.recent(conn, agent_id="demo")
            assert sorted(r.verdict for r in records) == ["falsified", "verified"]
            assert all(r.wake_id is not None and r.retraction_id is not None for r in records)
            assert [await introspection.get(conn, r.wake_id) is not None for r in records] == [True, True]  # each names a real wake
            assert all(r.instrument_state == "passed" and r.controls for r in records)
            by_retraction = await probes.recent(conn, retraction_id=wrong)
            assert [r.target for r in by_retraction] == ["gone.txt"]
            verified = next(r for r in records if r.verdict == "verified")
            assert verified.evidence["match_count"] == 1 and verified.evidence["size_bytes"] == 17
            assert verified.resolved_path == str((root / retractions.DEMO_PROBE_TARGET).resolve())
        # the same ledger renders the same text: the manifest stays stable between wakes
        again = await _due_block(config, st, NOW)
        assert again.text == text
        # a file changed on disk is seen at the next wake, not remembered from the last
        (root / retractions.DEMO_PROBE_TARGET).write_text("something else\n")
        changed = await _due_block(config, st, NOW)
        assert "'HARNESS PROBE OK'): falsified, 0 matches" in changed.text
    finally:
        await st.close()


async def test_a_dry_run_probes_and_records_nothing_and_says_so(store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config(PROBES)
    st = await _open(config)
    try:
        async with st.pg_conn() as conn:
            await retractions.seed_demo(conn, "demo", NOW, tmp_path / "probe-root")
            wrong = await retractions.insert(conn, new(corrected_at=NOW - dt.timedelta(days=5), probe_target="gone.txt", probe_mode="exists",
                                                       expected_retraction_pass_obs="gone.txt exists"))
        dry = await _due_wake(config, st, NOW)
        assert "harness probe of the pass observation (gone.txt exists): falsified" in dry.blocks[0].text  # the probe ran
        assert not dry.recorded and dry.note is not None and dry.note.startswith("dry run: nothing recorded; not stored: ")
        assert f"the probe of retraction {str(wrong)[:8]}" in dry.note
        async with st.pg_conn() as conn:
            assert await probes.recent(conn, agent_id="demo") == []
            assert await introspection.recent(conn) == []
    finally:
        await st.close()


async def test_the_due_block_counts_beyond_what_it_shows(store_config: Callable[..., Config]) -> None:
    config = store_config("[retractions]\ndue_shown = 2\n")
    st = await _open(config)
    try:
        async with st.pg_conn() as conn:
            for days in (4, 5, 6):
                await retractions.insert(conn, new(corrected_at=NOW - dt.timedelta(days=days)))
        block = await _due_block(config, st, NOW)
        assert block.text.startswith("3 falsifiers are due (2 shown, oldest first).") and block.rows == 3
        assert block.text.count("\n- ") == 2
    finally:
        await st.close()


async def test_nothing_due_is_empty_and_a_broken_ledger_is_could_not_check(store_config: Callable[..., Config]) -> None:
    config = store_config()
    st = await _open(config)
    try:
        empty = await _due_block(config, st, NOW)
        assert (empty.retrieval, empty.result, empty.text) == ("ok", "empty", "No falsifier is due.")
        await st.pg.execute("DROP TABLE retraction_ledger CASCADE")
        broken = await _due_block(config, st, NOW)
        assert broken.retrieval == "failed" and broken.result == "unknown"
        assert broken.text.startswith("could not check: UndefinedTableError")
        assert "No falsifier is due" not in broken.text
    finally:
        await st.close()


# -- the tools ---------------------------------------------------------------------------------


async def test_retract_settle_and_probe_tools(store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config(PROBES)
    root = tmp_path / "probe-root"
    root.mkdir()
    (root / "report.txt").write_text("status: absent\n")
    st = await _open(config)
    try:
        registry = loader.build(entry_points=False)
        assert registry.get("retract").mutates and registry.get("settle_falsifier").mutates and not registry.get("claim_probe").mutates
        assert "claim_probe" in [t.name for t in registry.binding(["wake.whisper"])]
        assert "retract" not in [t.name for t in registry.binding(["wake.whisper"])]
        assert {"retract", "settle_falsifier"} <= {t.name for t in registry.binding(["wake.whisper", "wake.surface"])}

        ctx = ctx_for(config, st)
        with pytest.raises(ToolInputError, match="same observation"):
            await epistemic_tools.retract.handler(ctx, **fields(overturn_retraction_condition="PROBE.TXT is there."))
        with pytest.raises(ToolInputError, match="why_wrong is required"):
            await epistemic_tools.retract.handler(ctx, **{**fields(), "why_wrong": "   "})
        with pytest.raises(ToolInputError, match="bad probe: mode exists takes no needle"):
            await epistemic_tools.retract.handler(ctx, **fields(), probe={"target": "report.txt", "mode": "exists", "needle": "x"})
        async with st.pg_conn() as conn:
            assert await conn.fetchval("SELECT COUNT(*) FROM retraction_ledger") == 0  # refusals wrote nothing

        out = await epistemic_tools.retract.handler(ctx, **fields(caught_by="human", row_class="send"),
                                              probe={"target": "report.txt", "mode": "contains", "needle": "absent"})
        rid = uuid.UUID(out["id"])
        async with st.pg_conn() as conn:
            row = await retractions.get(conn, rid)
        assert row is not None and (row.caught_by, row.row_class, row.probe_needle, row.probe_negate) == (
            "human", "send", "absent", False
        )

        probed = await epistemic_tools.claim_probe.handler(ctx, target="report.txt", mode="contains", needle="absent",
                                                     assertion="the word is absent", retraction_id=str(rid))
        assert probed["verdict"] == "verified" and probed["evidence"]["match_count"] == 1 and probed["instrument"] == "passed"
        escaped = await epistemic_tools.claim_probe.handler(ctx, target="../secret", mode="exists")
        assert escaped["verdict"] == "error" and "'..' escapes" in escaped["evidence"]["cause"]
        with pytest.raises(ToolInputError, match="no retraction"):
            await epistemic_tools.claim_probe.handler(ctx, target="report.txt", mode="exists", retraction_id=str(uuid.uuid4()))
        async with st.pg_conn() as conn:
            records = await probes.recent(conn, agent_id="demo")
        assert len(records) == 2  # both share the wake's time: find the one tied to the retraction
        tied = next(r for r in records if r.retraction_id == rid)
        assert tied.assertion == "the word is absent" and tied.verdict == "verified"
        assert all(r.wake_id == ctx.wake_id for r in records)

        with pytest.raises(ToolInputError, match="not due until"):  # corrected just now: its falsifier has not matured
            await epistemic_tools.settle_falsifier.handler(ctx, id=str(rid), verdict="overturned", outcome="at once")
        later = ctx_for(config, st, now=ctx.now + dt.timedelta(days=3))
        settled = await epistemic_tools.settle_falsifier.handler(later, id=str(rid), verdict="overturned", outcome="the probe found it")
        assert settled["verdict"] == "overturned" and "retraction stands" in settled["meaning"]
        with pytest.raises(ToolInputError, match="already settled"):
            await epistemic_tools.settle_falsifier.handler(later, id=str(rid), verdict="upheld", outcome="x")
        with pytest.raises(ToolInputError, match="full uuid"):
            await epistemic_tools.settle_falsifier.handler(ctx, id="abc", verdict="upheld", outcome="x")
    finally:
        await st.close()


async def test_tool_writes_are_fenced(store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config(PROBES)
    (tmp_path / "probe-root").mkdir()
    st = await _open(config)
    try:
        old = await lease.acquire(st, "demo", ttl_ms=5000)
        await st.redis.delete(lease.LEASE_KEY.format(agent="demo"))
        newer = await lease.acquire(st, "demo", ttl_ms=5000)
        stale = ctx_for(config, st, fence=old.fence)
        with pytest.raises(StaleFence):
            await epistemic_tools.retract.handler(stale, **fields())
        with pytest.raises(StaleFence):
            await epistemic_tools.claim_probe.handler(stale, target="x", mode="missing")
        async with st.pg_conn() as conn:
            assert await conn.fetchval("SELECT COUNT(*) FROM retraction_ledger") == 0
            assert await conn.fetchval("SELECT COUNT(*) FROM claim_probe_records") == 0
        fresh = ctx_for(config, st, fence=newer.fence)
        out = await epistemic_tools.retract.handler(fresh, **fields())
        with pytest.raises(StaleFence):
            await epistemic_tools.settle_falsifier.handler(stale, id=out["id"], verdict="upheld", outcome="x")
        await newer.release()
    finally:
        await st.close()


# -- every column has a reader -----------------------------------------------------------------


@pytest.mark.parametrize("table, ledger", [("retraction_ledger", "retractions"), ("claim_probe_records", "probes")])
async def test_every_column_is_selected_by_some_query(store_config: Callable[..., Config], table: str, ledger: str) -> None:
    st = await _open(store_config())
    try:
        async with st.pg_conn() as conn:
            columns = [r["column_name"] for r in await conn.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_name = $1", table)]
    finally:
        await st.close()
    bodies = ["\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")) for sql in queries.load(ledger).values()]
    selects = [sql for sql in bodies if sql.lstrip().upper().startswith("SELECT")]
    unread = [c for c in columns if not any(re.search(rf"\b{c}\b", sql.split("FROM")[0]) for sql in selects)]
    assert columns and unread == []


def test_demo_seed_text_matches_its_probe() -> None:
    # The seeded pass observation and the probe agree: the file the seed writes holds the needle.
    assert "HARNESS PROBE OK" in retractions.DEMO_PROBE_TEXT and len(retractions.DEMO_PROBE_TEXT.encode()) == 17
    assert json.dumps(retractions.VERDICT_MEANING)  # every settled verdict has a meaning for the tool's answer
    assert set(retractions.VERDICT_MEANING) == set(retractions.SETTLED_VERDICTS)
