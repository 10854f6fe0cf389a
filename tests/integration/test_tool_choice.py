"""A tier's `tool_choice` and a route's `tool_calls = "json_schema"`, over real PostgreSQL and
Redis and the scripted OpenAI-compatible server on loopback: what each request asked of the
server, and that a call read from a JSON answer goes through the same checks as a native one."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pytest

from ledgers import actions, transcripts
from tests.support import agents as agent_configs
from tests.support import marked, think_tools, wakes
from tests.support.openai_server import ScriptedServer, completion
from wake import stores
from wake.config import Config
from wake.errors import ConfigError
from wake.run import cycle, session
from wake.think import structured

T0 = dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)


@pytest.fixture
def make_config(store_config: Callable[..., Config], server: ScriptedServer) -> Callable[..., Config]:
    def make(*, choice: str = "", route: str = "", budget: str = "budget = { max_turns = 4, max_tool_calls = 4 }") -> Config:
        extra = agent_configs.tools("think_tools") + agent_configs.scripted(server.url, lines=[route]) + "\n[think]\ntool_timeout_s = 2\n"
        agents = agent_configs.toml(tiers={"surface": f"{agent_configs.SURFACE}\n{choice}\n{budget}"}, extra=[agent_configs.PERSONA])
        return store_config(extra, agents=agents)

    return make


async def _wake(config: Config) -> cycle.WakeOutcome:
    return await wakes.once(config, tier="surface")


def _json_answer(value: dict[str, Any], finish_reason: str | None = None) -> Any:
    return completion(json.dumps(value), finish_reason=finish_reason)


# -- native calls ---------------------------------------------------------------------------------


async def test_the_first_turn_and_the_later_ones_take_their_own_tool_choice(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(choice='tool_choice = { first = "required", later = "auto" }')
    server.push(completion(None, [("note_write", {"text": "acted first"})]), completion("Done."))
    o = await _wake(config)
    assert o.status == "completed", o.error
    assert [r.json["tool_choice"] for r in server.requests] == ["required", "auto"]
    assert think_tools.CALLS == [("note_write", {"text": "acted first"})]


async def test_a_tool_by_name_is_asked_for_in_the_openai_form(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(choice='tool_choice = { first = "note_write" }')
    server.push(completion(None, [("note_write", {"text": "x"})]), completion("Done."))
    o = await _wake(config)
    assert o.status == "completed", o.error
    assert server.requests[0].json["tool_choice"] == {"type": "function", "function": {"name": "note_write"}}
    assert server.requests[1].json["tool_choice"] == "auto"


async def test_a_named_tool_the_tier_does_not_bind_is_a_config_error(make_config: Callable[..., Config]) -> None:
    config = make_config(choice='tool_choice = "chat_only"')  # think_tools declares it for no wake surface
    with pytest.raises(ConfigError) as caught:
        session.build_registry(config)
    assert caught.value.exit_code == 78 and "tool_choice" in str(caught.value) and "'chat_only' is not bound" in str(caught.value)


def test_a_tool_choice_that_is_no_choice_is_refused_at_load(make_config: Callable[..., Config]) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(choice='tool_choice = "call anything you like"')
    assert "expected auto, required, none or a tool's name" in str(caught.value)


# -- calls through a JSON schema ------------------------------------------------------------------


async def test_a_json_answer_is_a_call_through_the_same_loop(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(route='tool_calls = "json_schema"', choice='tool_choice = { first = "required", later = "auto" }')
    server.push(
        _json_answer({"tool": "note_write", "arguments": {"text": "saw the build pass"}}),
        _json_answer({"final": "Wrote a note about the build."}),
    )
    o = await _wake(config)
    assert o.status == "completed", o.error
    first, second = (r.json for r in server.requests)
    bound = [t.name for t in o.binding]
    specs = [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}} for t in o.binding]
    assert "tools" not in first and "tool_choice" not in first  # the binding goes as the schema instead
    assert first["response_format"] == structured.response_format(specs, "required")
    assert second["response_format"] == structured.response_format(specs, "auto")
    branches = first["response_format"]["json_schema"]["schema"]["anyOf"]
    assert sorted(b["properties"]["tool"]["enum"][0] for b in branches) == sorted(bound)  # exactly the binding, no final answer
    assert first["messages"][0]["content"].endswith(structured.system_text(specs))  # the tools and the shape, in the cached prefix
    assert "- note_write: Write a note. Arguments: {" in first["messages"][0]["content"]
    assert think_tools.CALLS == [("note_write", {"text": "saw the build pass"})]
    # the model's JSON goes back as it wrote it, the tool's answer as a user message
    assert second["messages"][-2] == {"role": "assistant", "content": json.dumps({"tool": "note_write", "arguments": {"text": "saw the build pass"}})}
    assert second["messages"][-1]["role"] == "user"  # the answer as marked data (untrusted.spotlight), one span per line
    assert marked.plain(second["messages"][-1]["content"]) == 'The tool note_write answered:\n{"written": "saw the build pass"}'
    row = await wakes.record(config, o.wake_id)
    assert (row.turns, row.tool_calls, row.refusals, row.stop_reason) == (2, 1, 0, "done")
    assert row.final_text == o.final_text == "Wrote a note about the build."
    async with stores.connected(config) as st, st.pg_conn() as conn:
        done, total = await actions.since(conn, "demo", T0 - dt.timedelta(days=3650), limit=5)
    assert total == 1 and done[0].tool == "note_write" and done[0].wake_id == o.wake_id  # fenced, as a native call's
    # the witness keeps the call with the message that answered it, and its audit finds nothing
    async with stores.connected(config) as st, st.pg_conn() as conn:
        said = await transcripts.read(conn, o.wake_id)
    assert [(c.tool, c.outcome) for c, _, _ in said.calls] == [("note_write", "ok")]
    answer = [m for m, _, _ in said.messages][said.calls[0][0].answer_seq]
    assert answer.role == "user" and transcripts.audit(said, row.columns()) == []


async def test_a_json_call_outside_the_binding_or_its_schema_is_refused_and_counted(
    make_config: Callable[..., Config], server: ScriptedServer
) -> None:
    config = make_config(route='tool_calls = "json_schema"')
    server.push(
        _json_answer({"tool": "chat_only", "arguments": {}}),  # as if a server held the answer to no schema
        _json_answer({"tool": "note_write", "arguments": {"text": ""}}),  # minLength 1: the loop's own check
        completion("I will just talk instead."),  # not JSON at all
        _json_answer({"final": "Nothing done."}),
    )
    o = await _wake(config)
    assert o.status == "completed", o.error
    assert think_tools.CALLS == []
    row = await wakes.record(config, o.wake_id)
    # the unbound call and the unreadable answer are refused; all three attempts count as calls
    assert (row.turns, row.tool_calls, row.refusals, row.stop_reason) == (4, 3, 2, "done")
    answers = [m["content"] for m in server.requests[3].json["messages"] if m["role"] == "user"][-3:]
    assert "refused: tool 'chat_only' is not bound" in answers[0]
    assert "arguments do not match the schema" in answers[1]
    assert "your answer could not be read: the answer is not JSON" in answers[2]


async def test_the_summary_call_offers_only_the_final_answer(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(route='tool_calls = "json_schema"', budget="budget = { max_turns = 1, max_tool_calls = 4 }")
    server.push(
        _json_answer({"tool": "note_write", "arguments": {"text": "one"}}),
        completion('{"final": "Spent the budget on one no', finish_reason="length"),  # cut inside its text
    )
    o = await _wake(config)
    assert o.status == "completed", o.error
    summary = server.requests[1].json
    assert summary["response_format"]["json_schema"]["schema"] == structured.FINAL_BRANCH
    assert o.final_text is not None and o.final_text.startswith("Spent the budget on one no") and "cut off" in o.final_text
    row = await wakes.record(config, o.wake_id)
    assert (row.tool_calls, row.stop_reason) == (1, "max_turns")
