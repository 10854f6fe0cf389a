"""Toxic flows through real wakes (`wake.run.cycle`), with the three MCP servers of test_flows.py:
under `refuse` the wake's `tools` block says why the egress tool is not bound; a config change that
adds the egress server shows in the binding diff as a new toxic flow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ledgers.vocab import Retrieval
from tests.integration.test_flows import _three
from tests.support import gitrepo, wakes
from wake import stores
from wake.config import Config
from wake.run import cycle, session
from wake.stores import prepared


async def _wake(config: Config) -> cycle.WakeOutcome:
    registry = session.build_registry(config)
    async with stores.connected(config) as st:
        await prepared.prepare_schema(st)
        async with session.opened_mcp(config, registry, keep_alive=False):
            return await wakes.run(config, st, registry, agent_id="demo", tier="full")


def _block(o: cycle.WakeOutcome, name: str) -> str:
    return next(b for b in o.blocks if b.name == name).text


async def test_refuse_in_a_wake_and_the_new_flow_in_its_binding_diff(store_config: Callable[..., Config], tmp_path: Path) -> None:
    gitrepo.commit(tmp_path / "work", {"README.md": "hello\n"}, message="first")
    before = await _wake(store_config(_three(tmp_path / "work", with_egress=False)))
    assert "toxic flow" not in _block(before, "binding_diff")
    after = await _wake(store_config('[tools]\ntoxic_flows = "refuse"\n' + _three(tmp_path / "work")))
    bound = {t.name for t in after.binding}
    assert "post__send" not in bound and {"time__get_current_time", "git__git_status"} <= bound
    tools = next(b for b in after.blocks if b.name == "tools")
    assert tools.retrieval == Retrieval.ok and "post__send not bound (tools.toxic_flows = refuse)" in tools.text
    assert "new toxic flow " in _block(after, "binding_diff") and "egress post__send" in _block(after, "binding_diff")
