"""Flow labels and toxic flows over real MCP servers: `mcp-server-time`, `mcp-server-git` (against a
repository the test makes) and our scripted one (tests/support/mcp_server.py) serving tools with
the annotations each test gives, with real PostgreSQL."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from ledgers import tool_flows as flow_ledger
from surfaces import capability, flow_labels, mcp
from surfaces.registry import Registry
from tests.support import cli_fork, gitrepo
from wake import stores
from wake.cli import render
from wake.config import Config
from wake.run import mcp_tools, session
from wake.stores import prepared
from wake.witness import diff, flows

REPO = Path(__file__).resolve().parents[2]
AT = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.UTC)


def _scripted(name: str, *annotated: str, extra: str = "", bound: str = "*") -> str:
    args = ", ".join(f'"--annotated", "{a}"' for a in annotated)
    return (f'[tools.mcp.{name}]\ncommand = "{sys.executable}"\nargs = ["-m", "tests.support.mcp_server", {args}]\ncwd = "{REPO}"\n'
            f'surfaces = {{ "{bound}" = ["wake"] }}\n{extra}\n')


@contextlib.asynccontextmanager
async def _opened(config: Config) -> AsyncIterator[tuple[stores.Stores, Registry]]:
    """The registry with its MCP servers started, the operator's flow globs applied as the wake
    applies them (`[tools.mcp.<server>] flows` on each server's spec, `[tools] flows` on the registry)."""
    registry = session.build_registry(config)
    registry.label(config.tools.flows.items())
    specs = [dataclasses.replace(s, flows=tuple(config.tools.mcp[s.name].flows.items())) for s in mcp_tools.specs(config)]
    hub = mcp.Hub(specs, keep_alive=False)
    registry.attach(hub)
    await hub.start()
    try:
        async with stores.connected(config) as st:
            await prepared.prepare_schema(st)
            yield st, registry
    finally:
        await hub.close()


def _wake_cli(config: Config, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "XDG_")) and k not in ("REDIS_URL", "DATABASE_URL")}
    env["PYTHONPATH"] = str(REPO)
    return cli_fork.run([sys.executable, "-m", "wake", "--config", str(config.path), *args], capture_output=True, text=True, env=env,
                          timeout=240, cwd=REPO)


def _labels(registry: Registry) -> dict[str, frozenset[str]]:
    return {t.name: t.flows for t in registry if isinstance(t, mcp.McpTool)}


async def test_each_annotation_gives_its_default_labels(store_config: Callable[..., Config]) -> None:
    config = store_config(_scripted("a", "bare=none", "ro=ro", "rw=rw", "openro=open,ro", "openrw=open,rw", "closedro=closed,ro",
                                    "closedrw=closed,rw", extra='flows = { "closedrw" = ["private_data"] }'))
    async with _opened(config) as (_, registry):
        labels = _labels(registry)
    u, p, e = flow_labels.UNTRUSTED_INPUT, flow_labels.PRIVATE_DATA, flow_labels.EGRESS
    assert labels["a__bare"] == {u, e}  # the spec's defaults: openWorldHint true, readOnlyHint false
    assert labels["a__ro"] == {u}
    assert labels["a__rw"] == {u, e}
    assert labels["a__openro"] == {u}
    assert labels["a__openrw"] == {u, e}
    assert labels["a__closedro"] == frozenset()
    assert labels["a__closedrw"] == {p}  # the operator's glob replaces the annotations' (none here)


def _three(repo: Path, *, with_egress: bool = True) -> str:
    git = (f'[tools.mcp.git]\ncommand = "mcp-server-git"\nargs = ["--repository", "{repo}"]\n'
           'surfaces = { "git_status" = ["wake"] }\nflows = { "git_*" = ["private_data"] }\n')
    time = ('[tools.mcp.time]\ncommand = "mcp-server-time"\nargs = ["--local-timezone", "UTC"]\n'
            'surfaces = { "get_current_time" = ["wake"] }\nflows = { "get_current_time" = ["untrusted_input"] }\n')
    post = _scripted("post", "send=open,rw", extra='flows = { "send" = ["egress"] }', bound="send") if with_egress else ""
    return git + time + post


async def _vet(st: stores.Stores, registry: Registry, config: Config, policy: str) -> flows.Vetted:
    binding = registry.binding(config.tier("demo", "full").binds)
    async with st.pg_conn() as conn:
        return await flows.vet(conn, "demo", "full", binding, policy, AT)


async def test_warn_binds_and_records_a_finding_naming_the_three_tools(store_config: Callable[..., Config], tmp_path: Path) -> None:
    gitrepo.commit(tmp_path / "work", {"README.md": "hello\n"}, message="first")
    config = store_config(_three(tmp_path / "work"))
    async with _opened(config) as (st, registry):
        vetted = await _vet(st, registry, config, "warn")
        again = await _vet(st, registry, config, "warn")
        async with st.pg_conn() as conn:
            found = await flow_ledger.findings(conn, include_closed=True, limit=10)
    assert vetted.held.untrusted == ("time__get_current_time",)
    assert "git__git_status" in vetted.held.private  # with the built-ins that read the agent's memory and ledger
    assert vetted.held.egress == ("post__send",)
    assert "post__send" in {t.name for t in vetted.binding} and not vetted.refused
    assert vetted.finding_id is not None and again.finding_id is None  # once while open
    assert [(f.flow_id, f.untrusted, f.private, f.egress, f.state) for f in found] == [
        (vetted.held.flow_id, ["time__get_current_time"], list(vetted.held.private), ["post__send"], "open")]
    assert any("bound anyway" in line and "post__send" in line for line in flows.block_lines(vetted))
    listed = _wake_cli(config, "tools", "findings")
    assert listed.returncode == 0, listed.stderr
    assert f"toxic flow {vetted.held.flow_id}  tier demo.full  policy warn" in listed.stdout and "egress post__send" in listed.stdout
    as_json = json.loads(_wake_cli(config, "tools", "findings", "--json").stdout)
    assert [f["flow_id"] for f in as_json if f.get("kind") == "toxic_flow"] == [vetted.held.flow_id]
    unknown = _wake_cli(config, "tools", "accept-flow", "demo.full", "000000000000", "--by", "ops")
    assert unknown.returncode != 0 and "no open toxic flow" in unknown.stderr and unknown.stderr.count("\n") == 1
    done = _wake_cli(config, "tools", "accept-flow", "demo.full", str(vetted.held.flow_id), "--by", "ops")
    assert done.returncode == 0 and "accepted toxic flow" in done.stdout
    closed = _wake_cli(config, "tools", "findings", "--all")
    assert "accepted by ops" in closed.stdout


async def test_refuse_leaves_the_egress_tool_unbound_and_says_why_until_accepted(store_config: Callable[..., Config], tmp_path: Path) -> None:
    gitrepo.commit(tmp_path / "work", {"README.md": "hello\n"}, message="first")
    config = store_config(_three(tmp_path / "work"))
    async with _opened(config) as (st, registry):
        refused = await _vet(st, registry, config, "refuse")
        assert refused.held.flow_id is not None
        async with st.pg_conn() as conn:
            accepted = await flow_ledger.accept(conn, "demo", "full", refused.held.flow_id, by="ops", at=AT)
        after = await _vet(st, registry, config, "refuse")
    assert refused.refused == ("post__send",)
    names = {t.name for t in refused.binding}
    assert "post__send" not in names and {"time__get_current_time", "git__git_status"} <= names
    (line,) = flows.block_lines(refused)
    assert "post__send not bound (tools.toxic_flows = refuse)" in line and "git__git_status" in line
    assert accepted is not None and accepted.accepted_by == "ops"
    assert after.accepted and "post__send" in {t.name for t in after.binding} and after.finding_id is None


async def test_adding_the_third_server_shows_in_the_binding_diff_as_a_new_toxic_flow(store_config: Callable[..., Config], tmp_path: Path) -> None:
    gitrepo.commit(tmp_path / "work", {"README.md": "hello\n"}, message="first")
    before = store_config(_three(tmp_path / "work", with_egress=False))
    async with _opened(before) as (st, registry):
        first = await _vet(st, registry, before, "warn")
    after = store_config(_three(tmp_path / "work"))
    async with _opened(after) as (st, registry):
        second = await _vet(st, registry, after, "warn")
        unchanged = await _vet(st, registry, after, "warn")
    assert first.held.flow_id is None and first.change.created is None
    assert second.change.created is not None and second.change.removed is None
    assert unchanged.change == flows.Change()
    wake_diff = diff.both(None, None, {}, {})
    text = diff.render(wake_diff, "full", "UTC", AT, flow=second.change)
    assert f"new toxic flow {second.held.flow_id}" in text
    assert "untrusted input time__get_current_time; private data " in text and "git__git_status" in text and "; egress post__send" in text


def test_wake_registry_shows_each_tools_labels_and_each_tiers_flow(store_config: Callable[..., Config]) -> None:
    config = store_config(_scripted("post", "send=open,rw", bound="send"))
    listed = _wake_cli(config, "registry", "--json")
    assert listed.returncode == 0, listed.stderr
    cmap = json.loads(listed.stdout)
    tools = {t["name"]: t for t in cmap["tools"]}
    assert tools["post__send"]["flows"] == ["untrusted_input", "egress"]  # from its annotations
    assert tools["memory_read"]["flows"] == ["private_data"] and tools["local_time"]["flows"] == []
    full = cmap["tiers"]["demo.full"]["toxic_flow"]
    assert full["untrusted_input"] == ["post__send"] and full["egress"] == ["post__send"] and "memory_read" in full["private_data"]
    # the text of `wake registry` with MCP servers waits on another engineer's fix of render_report; the map's own text:
    text = render.capability_map(capability.CapabilityMap(**{k: v for k, v in cmap.items() if k != "mcp_servers"}))
    assert f"  ! toxic flow {full['id']}: untrusted input post__send; private data " in text
    assert any(line.startswith("post__send ") and "untrusted_input, egress" in line for line in text.splitlines())
