"""Which tools require approval (docs/approvals.md): declared, marked by `tools.requires_approval`
globs on the registry, or by an MCP server's `requires_approval` globs; never part of the
declaration the manifest hashes."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from surfaces import capability, mcp
from surfaces.errors import DeclarationError
from surfaces.registry import Registry, tool
from wake.witness import manifest

_NONE: dict[str, Any] = {"type": "object", "properties": {}}


@tool(name="send_mail", description="Send a mail.", parameters=_NONE, surfaces={"wake"}, mutates=True)
async def send_mail(ctx: Any) -> str:
    return "sent"


@tool(name="pay", description="Pay an invoice.", parameters=_NONE, surfaces={"wake"}, mutates=True, requires_approval=True)
async def pay(ctx: Any) -> str:
    return "paid"


def test_a_glob_marks_matching_tools_without_changing_their_declaration() -> None:
    registry = Registry()
    for t in (send_mail, pay):
        registry.register(t)
    before = manifest.tool_hash(registry.get("send_mail"))
    assert not registry.get("send_mail").requires_approval and registry.get("pay").requires_approval
    registry.require_approval(["send_*"])
    marked = registry.get("send_mail")
    assert marked.requires_approval and registry.get("pay").requires_approval
    assert marked is registry.get("send_mail")  # one marked copy per tool: its hash is computed once
    assert manifest.tool_hash(marked) == before  # the operator's policy is not the tool's declaration
    assert {t.name: t.requires_approval for t in registry.binding(["wake"])} == {"pay": True, "send_mail": True}
    entries = {e["name"]: e for e in capability.build(registry, {"demo.full": ["wake"]}).tools}
    assert entries["send_mail"]["requires_approval"] is True


def _spec(*rules: str) -> mcp.ServerSpec:
    return mcp.ServerSpec(name="ops", command="x", surfaces=(("*", ("wake",)),), requires_approval=rules)


def test_an_mcp_servers_globs_mark_its_tools_and_one_that_matches_nothing_is_refused() -> None:
    listed = [mcp_types.Tool(name="deploy", input_schema={"type": "object"}), mcp_types.Tool(name="status", input_schema={"type": "object"})]

    async def handler(**kw: Any) -> str:
        return ""

    tools = mcp.build_tools(_spec("dep*"), listed, "1", lambda name: handler, lambda t: None)
    assert {n: t.requires_approval for n, t in tools.items()} == {"ops__deploy": True, "ops__status": False}
    with pytest.raises(DeclarationError, match="requires_approval glob 'deplyo' matches no tool"):
        mcp.build_tools(_spec("deplyo"), listed, "1", lambda name: handler, lambda t: None)
