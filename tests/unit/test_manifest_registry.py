"""Manifest canonicalization and determinism; registry validation; surface matching; arrival states."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import unicodedata
from typing import Any
from unittest import mock

import pytest

from surfaces.errors import DeclarationError
from surfaces.registry import Registry, Tool, surface_meets
from tests.support import records, thirty_tools
from wake.arrival import engine as arrival
from wake.witness import diff, manifest

_SCRIPT = """
from wake.witness import manifest
m = manifest.build("agent", "whisper", {"b": "Caf\\u00e9 \\u2014 x", "a": "cafe\\u0301"},
                   {"t2": {"name": "t2", "parameters": {"z": 1, "a": [1, 2]}}, "t1": {"name": "t1", "description": "\\u00e9"}})
print(m.root)
"""


def test_root_is_identical_across_processes_with_different_hash_seeds() -> None:
    roots = set()
    for seed in ("0", "1", "12345", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, check=True)
        roots.add(out.stdout.strip())
    assert len(roots) == 1
    [root] = roots
    assert len(root) == 64 and int(root, 16) >= 0


def test_canonical_form_is_sorted_compact_utf8_nfc() -> None:
    assert manifest.canonical({"b": 1, "a": {"d": [1, "é"], "c": None}}) == '{"a":{"c":null,"d":[1,"é"]},"b":1}'.encode()
    decomposed = unicodedata.normalize("NFD", "Café")
    assert manifest.sha256_text(decomposed) == manifest.sha256_text("Café")
    assert manifest.canonical({decomposed: decomposed}) == manifest.canonical({"Café": "Café"})
    with pytest.raises(TypeError):
        manifest.canonical({"x": 1.5})


def test_a_text_is_hashed_once_by_its_content_and_hashes_as_computed_afresh() -> None:
    text = f"memory: 6 files {os.getpid()} \u2014 unchanged since the last wake"
    before = manifest.sha256_text.cache_info()
    first = manifest.sha256_text(text)
    again = manifest.sha256_text("".join(list(text)))  # equal content, another string object
    after = manifest.sha256_text.cache_info()
    assert first == again == hashlib.sha256(unicodedata.normalize("NFC", text).encode("utf-8")).hexdigest()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)


def test_one_character_changes_the_root() -> None:
    base = manifest.build("a", "whisper", {"identity": "hello"}, {"t": {"name": "t"}})
    same = manifest.build("a", "whisper", {"identity": "hello"}, {"t": {"name": "t"}})
    other = manifest.build("a", "whisper", {"identity": "hellp"}, {"t": {"name": "t"}})
    assert base.root == same.root != other.root
    assert manifest.build("a", "surface", {"identity": "hello"}, {"t": {"name": "t"}}).root != base.root


async def _handler(ctx: Any) -> None:
    return None


def _mk(**over: Any) -> Tool:
    fields: dict[str, Any] = dict(
        name="ok", description="A tool.", parameters={"type": "object", "properties": {}}, version="1", handler=_handler, mutates=False,
        surfaces=frozenset({"wake"}),
    )
    fields.update(over)
    return Tool(**fields)


@pytest.mark.parametrize(
    ("tool", "words"),
    [
        (_mk(description="  "), "tool 'ok' (builtin): empty description"),
        (_mk(parameters={"type": "object", "properties": {"x": {"type": "nonsense"}}}), "tool 'ok' (builtin): invalid JSON schema"),
        (_mk(parameters={"type": "string"}), "tool 'ok' (builtin): parameters must be a JSON schema of type 'object'"),
        (_mk(surfaces=frozenset({"wake.wisper"})), "tool 'ok' (builtin): unknown surface 'wake.wisper'"),
        (_mk(surfaces=frozenset()), "tool 'ok' (builtin): declares no surface"),
        (_mk(name="has space"), "tool 'has space' (builtin): name must match"),
        (_mk(handler=lambda ctx: None), "tool 'ok' (builtin): handler must be an async function"),
        (_mk(version=""), "tool 'ok' (builtin): empty version"),
    ],
)
def test_malformed_declarations_stop_registration_naming_the_tool(tool: Tool, words: str) -> None:
    with pytest.raises(DeclarationError) as caught:
        Registry().register(tool)
    assert str(caught.value).startswith(words)


def test_duplicate_name_is_refused() -> None:
    registry = Registry()
    registry.register(_mk())
    with pytest.raises(DeclarationError, match="tool 'ok' .*duplicate name, already declared by builtin"):
        registry.register(_mk())


def test_surface_nesting() -> None:
    assert surface_meets("wake", "wake.whisper")
    assert surface_meets("wake.whisper", "wake")
    assert surface_meets("wake.surface", "wake.surface")
    assert not surface_meets("wake.whisper", "wake.surface")
    assert not surface_meets("wake", "chat")
    assert not surface_meets("wake", "wakeful")


def test_binding_is_by_declaration_sorted_by_name() -> None:
    registry = Registry({"wake", "wake.whisper", "wake.surface", "wake.full", "chat", "ops"})
    for t in thirty_tools.TOOLS:
        registry.register(t)
    whisper = [t.name for t in registry.binding(["wake.whisper"])]
    assert whisper == sorted(whisper)
    assert whisper == [f"anywake_{i:02d}" for i in range(4)] + [f"whisper_{i:02d}" for i in range(5)]
    full = registry.binding(["wake"])
    assert len(full) == 19 and not any(t.name.startswith("chat_") or t.name == "ops_report" for t in full)


class _Ctx:
    pass


async def _found(ctx: Any) -> arrival.Found:
    return arrival.Found(text="x", rows=2)


async def _empty(ctx: Any) -> arrival.Found:
    return arrival.Found(text="nothing matched", rows=0)


async def _malformed(ctx: Any) -> Any:
    return ["not", "a", "Found"]


async def _disabled(ctx: Any) -> arrival.Found:
    raise arrival.Disabled("neo4j is not configured")


async def _refused(ctx: Any) -> arrival.Found:
    raise ConnectionRefusedError(111, "Connection refused")


async def _hang(ctx: Any) -> arrival.Found:
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


async def test_each_failure_is_typed_and_rendered_could_not_check() -> None:
    sources = [
        arrival.Source(name=n, cache_tier=arrival.CacheTier.session, fn=f)
        for n, f in (("found", _found), ("empty", _empty), ("malformed", _malformed), ("disabled", _disabled), ("refused", _refused), ("hang", _hang))
    ]
    blocks = {b.name: b for b in await arrival.assemble(sources, _Ctx(), 0.2)}
    assert (blocks["found"].retrieval, blocks["found"].result, blocks["found"].rows) == ("ok", "present", 2)
    assert (blocks["empty"].retrieval, blocks["empty"].result, blocks["empty"].text) == ("ok", "empty", "nothing matched")
    assert (blocks["malformed"].retrieval, blocks["malformed"].result) == ("failed", "unknown")
    assert blocks["malformed"].text == "could not check: malformed result: list"
    assert (blocks["disabled"].retrieval, blocks["disabled"].result) == ("disabled", "unknown")
    assert blocks["refused"].text == "could not check: ConnectionRefusedError: [Errno 111] Connection refused"
    assert blocks["hang"].text == "could not check: timeout" and blocks["hang"].reason == "timeout"
    assert 190 <= blocks["hang"].latency_ms < 400
    for name in ("malformed", "refused", "hang"):
        assert blocks[name].text.startswith("could not check: ") and blocks[name].text != ""


async def test_sources_with_their_own_timeouts_each_get_theirs_and_one_wait_serves_each_timeout() -> None:
    async def slow(ctx: Any) -> arrival.Found:
        await asyncio.sleep(0.4)
        return arrival.Found(text="late but in time", rows=1)

    cases = (("hang_short", _hang, None), ("slow_long", slow, 0.8), ("hang_long", _hang, 0.8), ("found", _found, None))
    sources = [arrival.Source(name=n, cache_tier=arrival.CacheTier.session, fn=f, timeout_s=t) for n, f, t in cases]
    blocks = {b.name: b for b in await arrival.assemble(sources, _Ctx(), 0.2)}
    assert (blocks["hang_short"].reason, blocks["hang_long"].reason) == ("timeout", "timeout")
    assert 190 <= blocks["hang_short"].latency_ms < 600 and 790 <= blocks["hang_long"].latency_ms < 1500
    assert blocks["slow_long"].retrieval == "ok" and 390 <= blocks["slow_long"].latency_ms < 790
    assert blocks["found"].retrieval == "ok" and [b.name for b in await arrival.assemble(sources[3:], _Ctx(), 0.2)] == ["found"]

    # twelve sources under one timeout: one task each and one timer for them all (a timer per
    # source stayed in the loop's heap until it fell due, long after its source had answered)
    loop = asyncio.get_running_loop()
    timers, tasks = 0, 0
    real_call_at, real_create_task = loop.call_at, loop.create_task

    def call_at(*args: Any, **kwargs: Any) -> Any:
        nonlocal timers
        timers += 1
        return real_call_at(*args, **kwargs)

    def create_task(*args: Any, **kwargs: Any) -> Any:
        nonlocal tasks
        tasks += 1
        return real_create_task(*args, **kwargs)

    twelve = [arrival.Source(name=f"s{i}", cache_tier=arrival.CacheTier.session, fn=_found) for i in range(12)]
    with mock.patch.object(loop, "call_at", call_at), mock.patch.object(loop, "create_task", create_task):
        blocks_12 = await arrival.assemble(twelve, _Ctx(), 5.0)
    assert [b.retrieval for b in blocks_12] == ["ok"] * 12
    assert (tasks, timers) == (12, 1)


def test_prompt_order_is_static_to_volatile_keeping_configured_order() -> None:
    def b(name: str, tier: arrival.CacheTier) -> arrival.Block:
        return arrival.Block(name=name, cache_tier=tier, text=name, retrieval="ok", result="present", reason=None, latency_ms=0, rows=1)

    blocks = [
        b("clock", arrival.CacheTier.volatile), b("identity", arrival.CacheTier.static), b("recent", arrival.CacheTier.session),
        b("diff", arrival.CacheTier.volatile),
    ]
    assert [x.name for x in arrival.prompt_order(blocks)] == ["identity", "recent", "clock", "diff"]
    assert arrival.render_prompt(blocks).startswith("## identity\nidentity\n\n## recent")


def test_diff_compare_tools_and_blocks() -> None:
    import datetime as dt

    prev = records.compared(
        wake_id="w1", tier="whisper", started_at=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
        tool_hashes={"a": "1", "b": "2", "c": "3"},
        blocks={
            "x": {"hash": "h", "retrieval": "ok"}, "y": {"hash": "f", "retrieval": "failed"}, "z": {"hash": "k", "retrieval": "ok"},
            diff.DIFF_BLOCK: {"hash": "d", "retrieval": "ok"},
        },
    )
    d = diff.compare(
        prev, {"a": "1", "b": "9", "d": "4"},
        {"x": {"hash": "h", "retrieval": "ok"}, "y": {"hash": "g", "retrieval": "ok"}, "z": {"hash": "q", "retrieval": "failed"}},
    ).as_json()  # the row's JSON
    assert d["tools"] == {"added": ["d"], "removed": ["c"], "changed": ["b"], "held": 3}
    assert d["blocks"]["unchanged"] == ["x"] and d["blocks"]["recovered"] == ["y"] and d["blocks"]["newly_failing"] == ["z"]
    assert d["blocks"]["changed"] == ["y", "z"] and d["blocks"]["removed"] == []
    assert diff.compare(None, {}, {}).as_json() == {"first": True, "against": None}


def test_entry_point_group_loads_tools(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "ep_tools.py"
    package.write_text(
        "from surfaces.registry import tool\n"
        "@tool(name='from_entry_point', description='Declared by a plugin.', parameters={'type': 'object'}, surfaces={'wake.surface'})\n"
        "async def from_entry_point(ctx): return 'hi'\n"
        "def register(registry):\n    registry.register(from_entry_point)\n"
    )
    dist = tmp_path / "ep_tools-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-tools\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[wake.tools]\nplugin = ep_tools:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from surfaces import loader

    registry = loader.build()
    assert registry.get("from_entry_point").origin == "entry point plugin"
    assert "from_entry_point" in [t.name for t in registry.binding(["wake.surface"])]
    assert "from_entry_point" not in [t.name for t in loader.build(entry_points=False)]


def test_capability_map_flags_a_bind_no_tool_declares() -> None:
    from surfaces import capability

    registry = Registry({"wake", "wake.whisper", "wake.surface", "wake.full", "chat", "ops"})
    registry.register(_mk(name="only_whisper", surfaces=frozenset({"wake.whisper", "chat"})))
    cmap = capability.build(registry, {"a.whisper": ["wake.whisper"], "a.full": ["wake.full"]})
    assert cmap.inert == ["tier a.full binds surface 'wake.full', which no tool declares"]
    assert cmap.tiers["a.whisper"]["bound"] == 1 and cmap.tiers["a.full"]["bound"] == 0
    assert cmap.surfaces == {"chat": 1, "wake.whisper": 1}


def test_a_built_in_tool_the_tiers_leave_unbound_is_not_inert_but_an_operators_tool_is() -> None:
    from surfaces import capability

    registry = Registry({"wake", "wake.whisper", "wake.surface", "wake.full", "chat", "ops"})
    registry.register(_mk(name="whisper_tool", surfaces=frozenset({"wake.whisper"})))
    registry.register(_mk(name="deep_builtin", surfaces=frozenset({"wake.full"})))  # built in; no tier here binds wake.full
    registry.register(_mk(name="ops_tool", surfaces=frozenset({"ops"}), origin="module opstools"))
    cmap = capability.build(registry, {"a.whisper": ["wake.whisper"]})
    assert cmap.inert == ["tool ops_tool declares surface 'ops', which no tier binds"]
    assert cmap.unbound_builtins == ["deep_builtin"] and cmap.as_dict()["unbound_builtins"] == ["deep_builtin"]
