"""The ledger tools over real PostgreSQL and Redis: fenced writes, clear errors that keep nothing,
declared surfaces, and no last_actions row of their own (the model loop writes those)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from ledgers import contact
from ledgers.errors import StaleFence
from surfaces import ledger_tools, loader
from tests.support import marked, sessions, wakes
from tests.support.ledger_ctx import wake_ctx
from wake import stores
from wake.arrival import records as recall
from wake.arrival import settled as settled_block
from wake.config import Config
from wake.run import session
from wake.stores import lease

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


async def _call(ctx: Any, name: str, **arguments: Any) -> Any:
    tool = loader.build(entry_points=False).get(name)
    jsonschema.validate(arguments, dict(tool.parameters))  # what the model loop checks before calling
    return await tool.handler(ctx, **arguments)


async def _count(st: stores.Stores, table: str) -> int:
    async with st.pg_conn() as conn:
        return int(await conn.fetchval(f"SELECT count(*) FROM {table}"))


def test_every_ledger_tool_is_declared_mutating_with_its_surfaces() -> None:
    registry = loader.build(entry_points=False)
    for tool in ledger_tools.TOOLS:
        assert registry.get(tool.name).mutates, tool.name
    whisper = {t.name for t in registry.binding(["wake.whisper"])}
    full = {t.name for t in registry.binding(["wake"])}
    chat = {t.name for t in registry.binding(["chat"])}
    names = {t.name for t in ledger_tools.TOOLS}
    assert names == {"remember_fact", "supersede_fact", "add_commitment", "complete_commitment", "fold_summary", "write_daybook"}
    assert names <= full
    assert names & whisper == {"complete_commitment", "write_daybook"}
    assert names - chat == {"write_daybook"}


async def test_tools_write_through_the_fence_and_show_up_in_the_arrival(store_config: Callable[..., Config]) -> None:
    config = store_config()
    registry = session.build_registry(config)
    async with sessions.ready_stores(config) as st:
        recorded = await wakes.run(config, st, registry, agent_id="demo", tier="full")
        held = await lease.acquire(st, "demo", ttl_ms=30_000)
        ctx = wake_ctx(config, st, NOW, wake_id=recorded.wake_id, fence=held.fence)
        async with st.pg_conn() as conn:
            m = await contact.record(conn, agent_id="demo", author="henke", channel="chat",
                                     body="The storage box in the basement is number 14.", received_at=NOW - dt.timedelta(hours=1))
        fact = await _call(ctx, "remember_fact", key="storage_box", value="basement box number 14", origin="saw", source_ref=str(m))
        assert fact["status"] == "active" and fact["attested"] is True
        newer = await _call(ctx, "supersede_fact", fact_id=fact["fact_id"], value="box 14 moved to the attic", origin="did",
                            anchors=[{"type": "url", "ref": "https://example.org/box"}])
        assert newer["status"] == "active" and newer["supersedes_id"] == fact["fact_id"]
        made = await _call(ctx, "add_commitment", title="Renew the box lease", due_on="2026-12-01")
        assert made == {"commitment_id": made["commitment_id"], "status": "open", "due_on": "2026-12-01"}
        other = await _call(ctx, "add_commitment", title="Tell Henke")
        assert await _call(ctx, "complete_commitment", commitment_id=other["commitment_id"], outcome="told") == {
            "commitment_id": other["commitment_id"], "status": "done"}
        entry = await _call(ctx, "write_daybook", entry="Moved the box fact to the attic.")
        facts_block = await recall.provenance_facts(ctx)
        settled_text = (await settled_block.settled_facts(ctx)).text
        daybook_text = marked.plain((await recall.recent_daybook(ctx)).text)
        last_actions = await _count(st, "last_actions")
        await held.release()
    assert "- ⟦did, 29 Nov 2026⟧ storage_box: box 14 moved to the attic ⟦url https://example.org/box⟧" in marked.plain(facts_block.text)
    assert "⟦SUPERSEDED saw, recorded 2026-11-29, superseded 2026-11-29⟧ storage_box: basement box number 14" in marked.plain(facts_block.text)
    assert f"Open commitments (1 of 1, newest first): #{made['commitment_id']} Renew the box lease (due 2026-12-01)" in marked.plain(settled_text)
    assert f"#{entry['entry_id']} 2026-11-29 13:00 (wake {str(recorded.wake_id)[:8]}): Moved the box fact to the attic." in daybook_text
    assert last_actions == 0  # the model loop records actions, not the tools


async def test_bad_input_is_a_clear_error_and_keeps_nothing(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        ctx = wake_ctx(config, st, NOW, wake_id=None)
        with pytest.raises(ValueError, match="due_on must be a calendar date YYYY-MM-DD, got '2026-13-01'"):
            await _call(ctx, "add_commitment", title="x", due_on="2026-13-01")
        with pytest.raises(ValueError, match="source_ref must be a UUID"):
            await _call(ctx, "remember_fact", key="k", value="v", origin="saw", source_ref="0123456789abcdef0123456789abcdef0")
        with pytest.raises(ValueError, match="must cite the raw message"):
            await _call(ctx, "remember_fact", key="k", value="v", origin="saw")
        with pytest.raises(ValueError, match="no commitment 99"):
            await _call(ctx, "complete_commitment", commitment_id=99)
        with pytest.raises(ValueError, match="no fact"):
            await _call(ctx, "supersede_fact", fact_id="00000000-0000-0000-0000-000000000001", value="v", origin="did")
        counts = [await _count(st, t) for t in ("facts", "commitments", "daybook")]
    assert counts == [0, 0, 0]


async def test_a_stale_fence_writes_nothing(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        old = await lease.acquire(st, "demo", ttl_ms=30_000)
        await old.release()
        newer = await lease.acquire(st, "demo", ttl_ms=30_000)  # a newer holder exists now
        ctx = wake_ctx(config, st, NOW, wake_id=None, fence=old.fence)
        for name, arguments in (
            ("remember_fact", {"key": "k", "value": "did it", "origin": "did"}),
            ("add_commitment", {"title": "stale"}),
            ("write_daybook", {"entry": "stale"}),
        ):
            with pytest.raises(StaleFence):
                await _call(ctx, name, **arguments)
        counts = [await _count(st, t) for t in ("facts", "commitments", "daybook")]
        await newer.release()
    assert newer.fence > old.fence and counts == [0, 0, 0]
