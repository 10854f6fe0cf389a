"""`manifest.audit`: every hash of a row recomputed from the stored content, each differing part named."""

from __future__ import annotations

from surfaces.registry import Registry
from tests.support import thirty_tools
from wake.witness import manifest

DECL = {"name": "local_time", "description": "The time.", "parameters": {"type": "object", "properties": {}}, "version": "1"}


def _row() -> tuple[dict[str, str], dict[str, str], dict[str, tuple[str, str]], str]:
    texts = {"identity": "You are demo.", "clock": "It is 09:00."}
    built = manifest.build("demo", "whisper", texts, {"local_time": DECL})
    return built.blocks, built.tools, manifest.contents(texts, {"local_time": DECL}), built.root


def test_an_untouched_row_recomputes_to_its_root() -> None:
    blocks, tools, stored, root = _row()
    assert manifest.audit("demo", "whisper", blocks, tools, root, ["local_time"], stored) == (root, [])
    assert {kind for kind, _ in stored.values()} == {"block", "tool"} and len(stored) == 3


def test_each_changed_part_is_named() -> None:
    blocks, tools, stored, root = _row()
    stored[blocks["clock"]] = ("block", "It is 10:00.")
    blocks["identity"] = "c" * 64
    _, found = manifest.audit("demo", "whisper", blocks, tools, root, ["local_time", "other"], stored)
    parts = {d.part: d.detail for d in found}
    assert set(parts) == {"block identity", "block clock", "tool list", "root"}
    assert parts["block clock"].endswith("the content was changed") and parts["block identity"].startswith("no stored block")


def test_a_tool_hash_pointing_at_another_tools_declaration_is_named() -> None:
    blocks, tools, stored, root = _row()
    other = {**DECL, "name": "wake_manifest"}
    digest = manifest.sha256_declaration(other)
    stored[digest] = ("tool", manifest.canonical(other).decode())
    tools["local_time"] = digest
    _, found = manifest.audit("demo", "whisper", blocks, tools, root, ["local_time"], stored)
    assert [(d.part, d.detail) for d in found][0] == ("tool local_time", "its stored declaration is of the tool 'wake_manifest'")


def test_a_row_from_before_the_content_store_checks_the_root_only() -> None:
    blocks, tools, _, root = _row()
    assert manifest.audit("demo", "whisper", blocks, tools, root, ["local_time"], None) == (root, [])
    assert [d.part for d in manifest.audit("demo", "whisper", blocks, tools, root, ["local_time"], {})[1]] == [
        "block clock", "block identity", "tool local_time",
    ]


def test_bound_tools_give_the_same_contents_as_their_declarations() -> None:
    # The cycle stores tool contents from Tool objects (encoded once per Tool); `verify`
    # recomputes from declarations: the two must be the same bytes under the same keys.
    registry = Registry({"wake", "wake.whisper", "wake.surface", "wake.full", "chat", "ops"})
    for t in thirty_tools.TOOLS:
        registry.register(t)
    tools = list(registry.binding(["wake"]))
    texts = {"clock": "now", "identity": "you"}
    by_object = manifest.contents_of(texts, tools)
    assert by_object == manifest.contents(texts, {t.name: t.declaration() for t in tools})
    assert manifest.contents_of(texts, tools) == by_object  # the remembered encoding gives the same again
    assert {k for k, (kind, _) in by_object.items() if kind == "tool"} == {manifest.tool_hash(t) for t in tools}
    assert len(tools) == 19
