"""Every built-in source, with its store failing, gives a `failed` block, never `ok` (docs/design.md,
"Typed retrieval state"): "could not check" is never a successful empty.

Two ways a store fails: the tables a source reads are gone (one part of a composed block can
fail alone), and the store is unreachable. A new built-in source must say here what it reads.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import socket
from collections.abc import Callable
from pathlib import Path

import neo4j
import pytest

from ledgers import graph
from ledgers.introspection import Diff, WakeDiff
from ledgers.vocab import Result, Retrieval
from memory.repo import MemoryRepo
from tests.support import records, sessions
from tests.support.ledger_ctx import wake_ctx
from wake import stores
from wake.arrival import engine, sources
from wake.config import Config
from wake.context import MemoryState, WakeContext
from wake.stores import Stores
from wake.witness import diff

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)

# source -> the PostgreSQL tables it reads
PG_TABLES: dict[str, tuple[str, ...]] = {
    "recent_wakes": ("wake_introspection_ledger",),
    "due_falsifiers": ("retraction_ledger",),
    "living_summaries": ("living_summaries",),
    "provenance_facts": ("facts",),
    "daybook": ("daybook",),
    "settled_facts": ("settled_state", "commitments", "retraction_ledger", "last_actions"),
    "cloister": ("cloister_findings",),
    "posture": ("human_contact",),
    "context_audit": ("context_events",),
}
OTHER_STORE = {"identity": "its persona files", "graph": "Neo4j", "memory": "the agent's git repository, as the canary found it"}
# The memory blocks read what the wake's start found: a canary that ran, or one that could not.
MEMORY_SOURCES = ("memory", "cloister")
# These read only the wake context, so no store of theirs can fail.
STORELESS = {"clock": "the wake's own time and request", "binding_diff": "the diff the engine computed from the blocks"}


def test_every_builtin_source_is_covered() -> None:
    assert set(PG_TABLES) | set(OTHER_STORE) | set(STORELESS) == set(sources.BUILTIN)
    assert not (set(PG_TABLES) & set(OTHER_STORE)) and not (set(PG_TABLES) & set(STORELESS))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _broken(st: Stores, name: str, tmp_path: Path) -> Stores:
    """`st` with the store `name` reads broken; the tables are dropped in the test's own database."""
    if name in PG_TABLES:
        async with st.pg_conn() as conn:
            for table in PG_TABLES[name]:
                await conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
        return st
    if name == "identity":
        (tmp_path / "persona.md").unlink()
        return st
    if name == "memory":  # broken through its context: the canary could not run
        return st
    driver = neo4j.AsyncGraphDatabase.driver(f"bolt://127.0.0.1:{_closed_port()}", connection_timeout=1.0)
    return dataclasses.replace(st, neo4j=driver, graph=graph.on(driver, database="neo4j", timeout_s=2.0, address="127.0.0.1"))


def _memory_ctx(config: Config, st: Stores, tmp_path: Path, *, canary_failed: bool = False) -> WakeContext:
    """A context whose memory the wake's start opened (or whose canary could not run)."""
    ctx = wake_ctx(config, st, NOW)
    if canary_failed:
        state = MemoryState(enabled=True, error="the repository could not be read: a test broke it")
    else:
        state = MemoryState(enabled=True, repo=MemoryRepo.open(tmp_path / "memory", config.memory_config("demo"), at=NOW))
    return dataclasses.replace(ctx, memory_state=state)


def _ctx(name: str, config: Config, st: Stores, tmp_path: Path, *, broken: bool = False) -> WakeContext:
    if name in MEMORY_SOURCES:
        return _memory_ctx(config, st, tmp_path, canary_failed=broken and name == "memory")
    return wake_ctx(config, st, NOW)


async def _run(source: engine.Source, ctx: object) -> engine.Block:
    return await engine.run_source(source, ctx, timeout_s=10.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(set(PG_TABLES) | set(OTHER_STORE)))
async def test_a_source_whose_store_fails_is_failed_never_ok(name: str, store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        healthy = await _run(sources.BUILTIN[name], _ctx(name, config, st, tmp_path)) if name != "graph" else None
        broken = await _broken(st, name, tmp_path)
        block = await _run(sources.BUILTIN[name], _ctx(name, config, broken, tmp_path, broken=True))
        if broken.neo4j is not None and broken is not st:
            await broken.neo4j.close()
    if healthy is not None:  # the instrument can tell the two apart
        assert healthy.retrieval == Retrieval.ok
    assert (block.retrieval, block.result) == (Retrieval.failed, Result.unknown), block
    assert "could not check" in block.text and block.reason


@pytest.mark.parametrize("name", sorted(PG_TABLES))
async def test_a_source_whose_database_is_unreachable_is_failed(name: str, store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        await st.pg.close()
        block = await _run(sources.BUILTIN[name], _ctx(name, config, st, tmp_path))
    assert (block.retrieval, block.result) == (Retrieval.failed, Result.unknown), block


@pytest.mark.parametrize("name", sorted(STORELESS))
async def test_a_storeless_source_reads_no_store(name: str, store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with stores.connected(config) as st:
        await st.pg.close()
        ctx = dataclasses.replace(wake_ctx(config, st, NOW), diff=WakeDiff(agent=Diff(), tier=Diff()))
        block = await _run(sources.BUILTIN[name], ctx)
    assert block.retrieval == Retrieval.ok, block


async def test_one_failed_part_fails_the_settled_block_and_the_row_names_it(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        before = await _run(sources.BUILTIN["settled_facts"], wake_ctx(config, st, NOW))
        async with st.pg_conn() as conn:
            await conn.execute("DROP TABLE commitments CASCADE")
        block = await _run(sources.BUILTIN["settled_facts"], wake_ctx(config, st, NOW))
    # what a `newly_failing` gate rule reads: the diff of the row's block states
    previous = records.compared(wake_id="0", tier="whisper", started_at=NOW, tool_hashes={}, blocks={"settled_facts": before.state("a")})
    assert diff.compare(previous, {}, {"settled_facts": block.state("b")}).blocks.newly_failing == ("settled_facts",)
    assert (block.retrieval, block.result) == (Retrieval.failed, Result.unknown)
    assert block.reason is not None and block.reason.startswith("Open commitments: UndefinedTableError")
    state = block.state("h")
    assert state["parts"]["Open commitments"]["retrieval"] == Retrieval.failed
    assert {p: s["retrieval"] for p, s in state["parts"].items() if p != "Open commitments"} == {
        "Settled state": Retrieval.ok, "Retractions": Retrieval.ok, "Confirmed actions, last 48 h": Retrieval.ok,
    }
    assert "Settled state: none recorded" in block.text  # the readable parts still render
