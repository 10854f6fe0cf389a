"""The wake cycle over real PostgreSQL and Redis: the cycle's acceptance tests and the row rules."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledgers import introspection, memory_ledger, queries, tool_flows
from memory import cloister
from memory.config import Severity
from surfaces import loader
from surfaces.registry import Registry, Tool
from tests.support import cli_fork, sessions, wakes
from tests.support.ledger_ctx import wake_ctx
from wake import stores
from wake.arrival import engine as arrival
from wake.arrival import sources
from wake.config import Config
from wake.run import cycle, session

REPO = Path(__file__).resolve().parents[2]
THIRTY = '[tools]\nmodules = ["tests.support.thirty_tools"]\nsurfaces = ["ops"]\n'
FIXED_NOW = dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC)
# The built-in tools (every ledger's) with no operator module: the counts below add the thirty to them.
BASE = loader.build(entry_points=False)
BASE_BOUND = {
    tier: len(BASE.binding(binds))
    for tier, binds in (("whisper", ["wake.whisper"]), ("surface", ["wake.whisper", "wake.surface"]), ("full", ["wake"]))
}


async def _wake(config: Config, registry: Registry, tier: str = "whisper", **kw: Any) -> cycle.WakeOutcome:
    async with sessions.ready_stores(config) as st:
        return await wakes.run(config, st, registry, agent_id="demo", tier=tier, **kw)


async def _rows(config: Config) -> list[Any]:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        return [await introspection.get(conn, r.wake_id) for r in await introspection.recent(conn, limit=100)]


async def test_capability_map_binds_declarations_and_ledger_counts_the_binding(store_config: Callable[..., Config]) -> None:
    config = store_config(THIRTY)
    registry = session.build_registry(config)
    assert len(registry) == 30 + len(BASE)  # 30 operator tools + the built-ins
    outcomes = {tier: await _wake(config, registry, tier) for tier in ("whisper", "surface", "full")}
    for tier, o in outcomes.items():
        names = [t.name for t in o.binding]
        assert not any(n.startswith("chat_") for n in names), tier
        assert "ops_report" not in names
        assert names == sorted(names)
    assert len(outcomes["whisper"].binding) == 5 + 4 + BASE_BOUND["whisper"]  # whisper_*, anywake_*, built-ins
    assert len(outcomes["surface"].binding) == 5 + 5 + 4 + BASE_BOUND["surface"]
    assert len(outcomes["full"].binding) == 5 + 5 + 5 + 4 + BASE_BOUND["full"]
    rows = {r.tier: r for r in await _rows(config)}
    for tier, o in outcomes.items():
        assert rows[tier].active_tools_count == len(o.binding) == len(rows[tier].active_tool_names)
        assert rows[tier].registry_tool_count == 30 + len(BASE)
        assert rows[tier].active_tool_names == [t.name for t in o.binding]


def test_wake_registry_flags_the_inert_declaration(store_config: Callable[..., Config]) -> None:
    config = store_config(THIRTY)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = cli_fork.run(
        [sys.executable, "-m", "wake", "--config", str(config.path), "registry"], capture_output=True, text=True, cwd=REPO, env=env, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "! tool ops_report declares surface 'ops', which no tier binds" in done.stdout
    assert f"registry: {30 + len(BASE)} tools" in done.stdout
    as_json = cli_fork.run(
        [sys.executable, "-m", "wake", "--config", str(config.path), "registry", "--json"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=60,
    )
    import json

    cmap = json.loads(as_json.stdout)
    assert cmap["tiers"]["demo.whisper"]["bound"] == 9 + BASE_BOUND["whisper"] and cmap["registry_size"] == 30 + len(BASE)
    chat = next(t for t in cmap["tools"] if t["name"] == "chat_00")
    assert chat["bound_by"] == [] and chat["surfaces"] == ["chat"]


async def test_removing_a_wake_declaration_shows_as_removed(store_config: Callable[..., Config]) -> None:
    config = store_config(THIRTY)
    before = session.build_registry(config)
    first = await _wake(config, before)
    assert "whisper_03" in [t.name for t in first.binding]
    after = Registry(before.known_surfaces)
    for t in before:
        after.register(dataclasses.replace(t, surfaces=frozenset({"chat"})) if t.name == "whisper_03" else t)
    second = await _wake(config, after)
    assert second.diff is not None
    assert second.diff.agent.tools.removed == ("whisper_03",)
    assert second.diff.tier.tools.removed == ("whisper_03",)
    diff_block = next(b for b in second.blocks if b.name == "binding_diff")
    assert f"- tools: removed whisper_03 (now holding {8 + BASE_BOUND['whisper']})" in diff_block.text
    [row] = [r for r in await _rows(config) if r.wake_id == second.wake_id]
    assert row.diff is not None and row.diff.agent.tools.removed == ("whisper_03",)
    # a changed declaration (schema) is "changed", not added/removed
    changed = Registry(before.known_surfaces)
    for t in after:
        changed.register(dataclasses.replace(t, parameters={"type": "object", "properties": {}}) if t.name == "whisper_01" else t)
    third = await _wake(config, changed)
    assert third.diff is not None and third.diff.agent.tools.changed == ("whisper_01",)


async def test_first_wake_says_it_is_the_first(store_config: Callable[..., Config]) -> None:
    config = store_config()
    o = await _wake(config, loader.build())
    assert next(b for b in o.blocks if b.name == "binding_diff").text.startswith("This is your first wake.")


async def _hung(ctx: Any) -> arrival.Found:
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


async def _crash(ctx: Any) -> arrival.Found:
    raise KeyError("persona index")


async def test_hung_source_fails_with_timeout_and_the_wake_completes_in_time(store_config: Callable[..., Config]) -> None:
    # memory off: the first wake's git bootstrap is not what this times
    config = store_config(agents=_agents(source_timeout_ms=300), WAKE_AGENTS__DEMO__MEMORY__ENABLED="false")
    hung = arrival.Source(name="hung", cache_tier=arrival.CacheTier.session, fn=_hung)
    started = time.perf_counter()
    o = await _wake(config, loader.build(), source_list=[sources.BUILTIN["identity"], hung, sources.BUILTIN["binding_diff"]])
    wall_ms = (time.perf_counter() - started) * 1000
    block = next(b for b in o.blocks if b.name == "hung")
    assert (block.retrieval, block.result, block.reason, block.text) == ("failed", "unknown", "timeout", "could not check: timeout")
    assert o.status == "completed"
    # bounded by the source timeout, not by the hour the source would hang (generous: a loaded machine stretches both)
    assert o.duration_ms < 60_000, o.duration_ms
    assert wall_ms < 120_000
    [row] = await _rows(config)
    assert row.blocks["hung"]["retrieval"] == "failed" and row.blocks["hung"]["reason"] == "timeout"


async def test_crashing_source_yields_failed_block_with_type_and_wake_settles(store_config: Callable[..., Config]) -> None:
    config = store_config()
    crash = arrival.Source(name="crash", cache_tier=arrival.CacheTier.volatile, fn=_crash)
    o = await _wake(config, loader.build(), source_list=[sources.BUILTIN["identity"], crash, sources.BUILTIN["binding_diff"]])
    block = next(b for b in o.blocks if b.name == "crash")
    assert block.retrieval == "failed" and block.reason == "KeyError: 'persona index'"
    assert o.status == "completed"
    [row] = await _rows(config)
    assert row.status == "completed" and row.finished_at is not None
    # the next wake sees the failing block recover
    again = await _wake(
        config, loader.build(),
        source_list=[sources.BUILTIN["identity"], dataclasses.replace(sources.BUILTIN["clock"], name="crash"), sources.BUILTIN["binding_diff"]],
    )
    assert again.diff is not None and again.diff.agent.blocks.recovered == ("crash",)


async def test_root_identical_for_identical_inputs_and_changes_with_one_character(store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config()
    fixed = [sources.BUILTIN["identity"], sources.BUILTIN["clock"]]
    a = await _wake(config, loader.build(), now=lambda: FIXED_NOW, source_list=fixed)
    b = await _wake(config, loader.build(), now=lambda: FIXED_NOW, source_list=fixed)
    assert a.manifest and b.manifest and a.manifest.root == b.manifest.root
    (tmp_path / "persona.md").write_text("You are a test agent!\n")  # one character differs
    c = await _wake(config, loader.build(), now=lambda: FIXED_NOW, source_list=fixed)
    assert c.manifest and c.manifest.root != a.manifest.root
    assert c.manifest.blocks["identity"] != a.manifest.blocks["identity"]
    assert c.manifest.blocks["clock"] == a.manifest.blocks["clock"]


class _BrokenTool(Tool):
    def declaration(self) -> dict[str, Any]:
        raise RuntimeError("declaration exploded")


async def test_exception_before_the_row_still_leaves_one_failed_row(store_config: Callable[..., Config]) -> None:
    config = store_config()
    registry = loader.build()
    good = registry.get("local_time")
    broken = Registry(registry.known_surfaces)
    broken.register(_BrokenTool(**{f.name: getattr(good, f.name) for f in dataclasses.fields(good)}))
    o = await _wake(config, broken)
    assert o.status == "failed" and o.error == "RuntimeError: declaration exploded"
    [row] = await _rows(config)
    assert (row.status, row.error, row.manifest_root) == ("failed", "RuntimeError: declaration exploded", None)


async def test_cancelled_wake_settles_aborted(store_config: Callable[..., Config]) -> None:
    config = store_config()

    thinking = asyncio.Event()

    async def slow_think(*args: Any) -> tuple[str, str]:
        thinking.set()
        await asyncio.sleep(3600)
        return "completed", ""

    async with stores.connected(config) as st:
        original = cycle.think
        cycle.think = slow_think  # type: ignore[assignment]
        try:
            task = asyncio.create_task(wakes.run(config, st, loader.build(), agent_id="demo", tier="whisper"))
            await asyncio.wait_for(thinking.wait(), timeout=120)  # cancelled inside the model call, however loaded the machine
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            cycle.think = original  # type: ignore[assignment]
    [row] = await _rows(config)
    assert row.status == "aborted" and row.error == "cancelled"


async def test_exactly_one_row_per_attempt_and_dry_run_records_nothing(store_config: Callable[..., Config]) -> None:
    config = store_config()
    registry = loader.build()
    for tier in ("whisper", "surface", "whisper"):
        await _wake(config, registry, tier)
    dry = await _wake(config, registry, "full", dry_run=True)
    assert dry.recorded is False and "## identity" in dry.prompt and dry.manifest is not None
    rows = await _rows(config)
    assert len(rows) == 3 and all(r.status == "completed" for r in rows)
    assert all(r.note.startswith("harness-only") for r in rows)
    recent = next(b for b in (await _wake(config, registry)).blocks if b.name == "recent_wakes")
    assert recent.rows == 3 and recent.result == "present"
    lines = recent.text.splitlines()[1:]
    assert len(set(lines)) == 3 and all(f" {str(r.wake_id)[:8]}: completed" in recent.text for r in rows)  # lines told apart



async def test_the_whisper_reads_of_its_previous_wakes_only_what_it_compares_and_lists(store_config: Callable[..., Config]) -> None:
    """Every whisper reads both previous wakes and the recent ones: the columns the diff, the gate and
    the recent-wakes block use, not a full wake's final text or stored diff; and the block reads
    the same from them as from `wake ledger`'s listing of the same rows."""
    config = store_config()
    registry = loader.build()
    for tier in ("whisper", "surface", "whisper"):
        await _wake(config, registry, tier)
    newest = await _rows(config)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            for row in newest:  # what a full wake writes, which no later whisper shows or compares
                assert await introspection.record_final_text(conn, row.wake_id, "x" * 65_536)
            sql = introspection._sql("previous_settled_both")
            columns = {a.name for a in (await conn.prepare(sql)).get_attributes()}
            columns |= {c.strip() for listed in re.findall(r"ROW\(([^()]*)\)", sql) for c in listed.split(",")}  # the rows inside its row
            before = newest[0].started_at + dt.timedelta(seconds=1)
            read = await introspection.previous_both(conn, "demo", "whisper", before, recent=sources.RECENT_WAKES)
            listed = await introspection.recent(conn, agent_id="demo", limit=sources.RECENT_WAKES)
        ctx = wake_ctx(config, st, before)
    assert not columns & {"final_text", "diff", "arrival_order", "active_tool_names", "host", "config_hash"}, columns
    assert {"wake_id", "blocks", "tool_hashes", "trigger", "note"} <= columns, columns  # it does see the rows' columns
    assert read.agent is not None and read.tier is not None and read.recent is not None
    assert (read.agent.wake_id, read.agent.tier, read.tier.wake_id) == (newest[0].wake_id, "whisper", newest[0].wake_id)
    assert read.agent.blocks and read.agent.tool_hashes is not None
    assert [r.wake_id for r in read.recent] == [r.wake_id for r in listed] and len(listed) == 3
    fused = sources._recent_block(ctx, list(read.recent))
    fallback = sources._recent_block(ctx, [introspection.RecentLine.from_row(r.columns()) for r in listed])
    assert fused == fallback and fused.rows == 3

async def test_step_4_reads_together_what_each_ledger_reads_alone(store_config: Callable[..., Config]) -> None:
    """The canary's read, the tier's flows and the previous wakes, made in one statement
    (`queries.together`, each part's parameters numbered after the others'), read what each part
    reads alone, with rows in every part."""
    config = store_config()
    registry = loader.build()
    for tier in ("whisper", "surface", "whisper"):
        await _wake(config, registry, tier)
    newest = await _rows(config)
    before = newest[0].started_at + dt.timedelta(seconds=1)
    held = tool_flows.Held(flow_id="f1", untrusted=("fetch",), private=("read_mail",), egress=("send",))
    async with sessions.ready_stores(config) as st, st.pg_conn() as conn:
        await memory_ledger.record_findings(conn, "demo", [
            cloister.Finding(severity=Severity.WARN, domain="d", path=f"notes/{i}.md", commit=None, rule="r", excerpt=str(i)) for i in range(2)
        ], before)
        await tool_flows.save_state(conn, "demo", "whisper", held)
        await tool_flows.raise_finding(conn, "demo", "whisper", held, "refuse", before)
        assert await tool_flows.accept(conn, "demo", "whisper", "f1", by="op", at=before) is not None
        parts = (memory_ledger.open_view_part("demo"), tool_flows.tier_flows_part("demo", "whisper"),
                 introspection.previous_part("demo", "whisper", before, recent=sources.RECENT_WAKES))
        read = await queries.together(conn, *parts)
        alone = (await queries.one(conn, parts[0]), await queries.one(conn, parts[1]), await queries.one(conn, parts[2]))
    assert read == alone
    findings, flows, previous = read
    assert [f.path for f in findings.rows] == ["notes/0.md", "notes/1.md"] and findings.counts["WARN"] == 2
    assert flows == tool_flows.TierFlows(last=held, accepted=frozenset({"f1"}))
    assert previous.agent is not None and previous.agent.wake_id == newest[0].wake_id and previous.recent is not None
    assert [w.wake_id for w in previous.recent] == [r.wake_id for r in newest]


def _agents(source_timeout_ms: int) -> str:
    from tests.conftest import DEMO_TIERS

    return DEMO_TIERS.replace('binds = ["wake.whisper"]\n', f'binds = ["wake.whisper"]\nsource_timeout_ms = {source_timeout_ms}\n', 1)
