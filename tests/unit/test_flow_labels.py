"""Flow labels (surfaces/flow_labels.py): the MCP annotation defaults, the operator's globs, the built-ins'
labels, the triangle a binding holds, and the config keys that carry them (docs/tools.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from surfaces import capability, flow_labels, loader
from surfaces.registry import DeclarationError, Registry, tool
from wake import config as wake_config
from wake.errors import ConfigError
from wake.witness import manifest

U, P, E = flow_labels.UNTRUSTED_INPUT, flow_labels.PRIVATE_DATA, flow_labels.EGRESS
_NONE: dict[str, Any] = {"type": "object", "properties": {}}


@pytest.mark.parametrize(("annotations", "labels"), [
    ({}, {U, E}),  # the MCP spec's defaults: openWorldHint true, readOnlyHint false
    ({"readOnlyHint": True}, {U}),
    ({"readOnlyHint": False}, {U, E}),
    ({"openWorldHint": True}, {U, E}),
    ({"openWorldHint": True, "readOnlyHint": True}, {U}),
    ({"openWorldHint": False}, set()),
    ({"openWorldHint": False, "readOnlyHint": True}, set()),
    ({"openWorldHint": False, "readOnlyHint": False, "destructiveHint": True}, set()),
])
def test_each_annotation_default(annotations: dict[str, Any], labels: set[str]) -> None:
    assert flow_labels.from_annotations(annotations) == labels


def test_the_last_matching_glob_replaces_the_defaults() -> None:
    rules = [("git_*", [P]), ("git_push", [P, E])]
    assert flow_labels.overridden("git_log", frozenset({U}), rules) == {P}
    assert flow_labels.overridden("git_push", frozenset({U}), rules) == {P, E}
    assert flow_labels.overridden("fetch", frozenset({U}), rules) == {U}


def test_builtins_are_labelled_and_labels_are_not_declaration() -> None:
    registry = loader.build(entry_points=False)
    assert registry.get("memory_read").flows == {P} and registry.get("local_time").flows == frozenset()
    before = manifest.tool_hash(registry.get("memory_read"))
    registry.label([("memory_read", [E])])
    assert registry.get("memory_read").flows == {E}
    assert manifest.tool_hash(registry.get("memory_read")) == before  # the operator's labels are policy, not the tool's contract


@tool(name="fetch", description="Fetch a page.", parameters=_NONE, surfaces={"wake"}, flows={U})
async def fetch(ctx: Any) -> str:
    return "page"


@tool(name="post", description="Post a message.", parameters=_NONE, surfaces={"wake.full"}, mutates=True, flows={E})
async def post(ctx: Any) -> str:
    return "posted"


@tool(name="vault", description="Read a secret.", parameters=_NONE, surfaces={"wake"}, flows={P})
async def vault(ctx: Any) -> str:
    return "secret"


def test_a_triangle_needs_every_leg_and_its_id_follows_its_tools() -> None:
    assert flow_labels.triangle([fetch, vault]).flow_id is None
    held = flow_labels.triangle([fetch, vault, post])
    assert (held.untrusted, held.private, held.egress) == (("fetch",), ("vault",), ("post",))
    registry = Registry()
    for t in (fetch, vault, post):
        registry.register(t)
    tiers = capability.build(registry, {"a.full": ["wake.full"], "a.surface": ["wake.surface"]}).tiers
    assert tiers["a.full"]["toxic_flow"] == {"id": held.flow_id, "untrusted_input": ["fetch"], "private_data": ["vault"], "egress": ["post"]}
    assert tiers["a.surface"]["toxic_flow"] is None  # post declares wake.full only
    registry.label([("fetch", [U, P])])
    assert flow_labels.triangle(registry.binding(["wake.full"])).flow_id != held.flow_id  # a tool joined a leg: a new flow


def test_an_unknown_label_stops_registration() -> None:
    @tool(name="odd", description="Odd.", parameters=_NONE, surfaces={"wake"}, flows={"secret"})
    async def odd(ctx: Any) -> str:
        return ""

    with pytest.raises(DeclarationError, match="unknown flow label 'secret'"):
        Registry().register(odd)


@given(label=st.text(min_size=1, max_size=30), policy=st.text(max_size=20))
def test_bad_flow_keys_are_one_config_error(write_config: Callable[..., Path], label: str, policy: str) -> None:
    good_label, good_policy = label in flow_labels.LABELS, policy in ("refuse", "warn", "off")
    body = f'[tools]\nflows = {{ "x*" = [{_toml(label)}] }}\ntoxic_flows = {_toml(policy)}\n'
    path = write_config(body + '[agents.demo]\npersona_files = ["persona.md"]\n[agents.demo.tiers.full]\nbinds = ["wake"]\n')
    if good_label and good_policy:
        assert wake_config.load_config_file(path, environ={}).tools.toxic_flows == policy
        return
    with pytest.raises(ConfigError) as raised:
        wake_config.load_config_file(path, environ={})
    message = str(raised.value)
    assert "Traceback" not in message
    assert ("tools.flows" in message) == (not good_label) and ("tools.toxic_flows" in message) == (not good_policy)


def _toml(text: str) -> str:
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}" for c in text) + '"'


@given(tier=st.text(max_size=80).filter(lambda t: not all(t.partition("."))))
def test_accept_flow_refuses_a_tier_that_is_not_agent_dot_tier(tier: str) -> None:
    from click.testing import CliRunner

    from wake.cli import app
    from wake.cli import tools as tools_cli

    result = CliRunner().invoke(tools_cli.tools_group, ["accept-flow", "--by", "ops", "--", tier, "abc"], obj=app.Context("/nonexistent.toml"))
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "expected AGENT.TIER" in result.output and "Traceback" not in result.output



def test_an_mcp_servers_flow_globs_replace_the_annotations_and_must_match() -> None:
    import mcp_types

    from surfaces import mcp

    listed = [mcp_types.Tool(name="fetch", input_schema={"type": "object"}, annotations=mcp_types.ToolAnnotations(read_only_hint=True)),
              mcp_types.Tool(name="notes", input_schema={"type": "object"})]

    async def handler(ctx: Any, **kw: Any) -> str:
        return ""

    spec = mcp.ServerSpec(name="s", command="x", surfaces=(("*", ("wake",)),), flows=(("notes", ("private_data",)),))
    tools = mcp.build_tools(spec, listed, "1", lambda name: handler, lambda t: None)
    assert tools["s__fetch"].flows == {U} and tools["s__notes"].flows == {P}
    with pytest.raises(DeclarationError, match="tools.mcp.s.flows glob 'nots' matches no tool"):
        mcp.build_tools(mcp.ServerSpec(name="s", command="x", flows=(("nots", ("egress",)),)), listed, "1", lambda name: handler, lambda t: None)
