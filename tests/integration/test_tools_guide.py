"""docs/tools.md's example module, taken from the page as it is written: loaded through
`tools.modules` and called in a real wake's context (PostgreSQL), and bound by the tiers its
surfaces meet."""

from __future__ import annotations

import datetime as dt
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledgers.vocab import Tier
from tests.support import wakes
from wake import stores
from wake.config import Config
from wake.context import WakeContext, WakeRequest
from wake.run import session
from wake.stores import prepared

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "tools.md"


@pytest.fixture
def guide_module(tmp_path: Path) -> Iterator[str]:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "docs/tools.md has no python example"
    (tmp_path / "guide_tools.py").write_text(blocks[0], encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        yield "guide_tools"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("guide_tools", None)


async def test_the_guide_example_module_loads_binds_and_writes(store_config: Callable[..., Config], guide_module: str) -> None:
    config = store_config(f'[tools]\nmodules = ["{guide_module}"]\n')
    registry = session.build_registry(config)
    tool = registry.get("note_for_operator")
    assert tool.mutates and tool.origin == f"module {guide_module}"
    async with stores.connected(config) as st:
        async with st.pg_conn() as conn:  # the operator's table, as the guide says: created by the owner before wake starts
            await conn.execute(importlib.import_module(guide_module).SCHEMA)
        await prepared.prepare_schema(st)  # which gives it its policy and the tool role its grant
        whisper = await wakes.run(config, st, registry, agent_id="demo", tier="whisper")
        full = await wakes.run(config, st, registry, agent_id="demo", tier="full")
        assert "note_for_operator" not in [t.name for t in whisper.binding]  # wake.surface and wake.full only
        assert "note_for_operator" in [t.name for t in full.binding]
        now = dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC)
        ctx = WakeContext(config=config, stores=st, request=WakeRequest(agent_id="demo", tier=Tier.full), now=now)
        answer = await tool.handler(ctx, note="the disk is 90% full")
        async with st.pg_conn() as conn:
            rows = await conn.fetch("SELECT agent_id, note, wake_id FROM operator_notes")
    assert answer.startswith("noted for the operator at 2026-11-29")
    assert [(r["agent_id"], r["note"], r["wake_id"]) for r in rows] == [("demo", "the disk is 90% full", ctx.wake_id)]
