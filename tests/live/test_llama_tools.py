"""A real model completes the tool loop: SmolLM2-135M on a real llama.cpp server, through a
recording proxy on loopback, with real PostgreSQL and Redis.

The route calls tools through a JSON schema (`tool_calls = "json_schema"`, wake.think.structured):
the llama.cpp these tests build enforces `response_format` as a grammar, where it does not enforce
`tool_choice: "required"` (docs/model.md). A tier whose first turn is `required` therefore always
opens with a call: nothing here depends on what the model chose to do, only on what the harness
did with it. Every assertion is on the harness: what it sent, what it ran, what it recorded and
refused; the model's words are never checked.

The tiers bind the `live` tools (and `pin_note` on `live_write`): their declarations and the arrival
fit the model's 8,192-token window with room to answer (measured with the server's /tokenize in
`test_the_live_tiers_fit_the_models_window`); the whole wake binding would not, and a binding that
cannot fit still stops before any call (tests/live/test_llama.py).
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from ledgers import actions, fences, introspection
from tests.support import llama_fixtures, marked, sessions, wakes
from tests.support.llama_fixtures import LiveLlama
from tests.support.recording_proxy import Exchange, RecordingProxy
from wake import stores
from wake.config import Config
from wake.run import cycle, session
from wake.think import prompt, structured

pytestmark = pytest.mark.live

T0 = dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)
LIVE = '["live"]'


# What these tests hold is the tool loop, not the arrival: two blocks keep each prompt short (prompt
# evaluation on a CPU is most of a live test's time). `sources=""` gives the tier its default sources.
SHORT_ARRIVAL = 'sources = ["identity", "clock"]'


@pytest.fixture
def make_config(store_config: Callable[..., Config], proxy: RecordingProxy, llama_server_info: LiveLlama) -> Callable[..., Config]:
    live = llama_server_info

    def make(*, binds: str = LIVE, choice: str = 'tool_choice = { first = "required", later = "auto" }',
             budget: str = "budget = { max_turns = 3, max_tool_calls = 2, max_output_tokens = 160, max_cost_usd = 1.0 }",
             sources: str = SHORT_ARRIVAL) -> Config:
        extra = llama_fixtures.tools_and_route(live, proxy.url, name="llama_json")
        agents = f"""[agents.demo]
timezone = "Europe/Stockholm"
persona_files = ["persona.md"]

[agents.demo.tiers.surface]
binds = {binds}
model = "llama_json"
{choice}
{budget}
{sources}
"""
        return store_config(extra, agents=agents)

    return make


async def _wake(config: Config, **kw: Any) -> cycle.WakeOutcome:
    async with sessions.ready_stores(config) as st:
        return await wakes.run(config, st, session.build_registry(config), agent_id="demo", tier="surface", **kw)


async def _row(config: Config, wake_id: Any) -> introspection.WakeRecord:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        row = await introspection.get(conn, wake_id)
    assert row is not None
    return row


def _offered(e: Exchange) -> list[str]:
    """The tool names a request's schema offered (empty: the final answer only)."""
    schema = e.request["response_format"]["json_schema"]["schema"]
    branches = schema.get("anyOf", [schema])
    return sorted(b["properties"]["tool"]["enum"][0] for b in branches if "tool" in b["properties"])


def _usage_agrees(row: introspection.WakeRecord, mine: list[Exchange]) -> None:
    assert row.turns == len(mine)
    assert row.prompt_tokens == sum(e.usage["prompt_tokens"] for e in mine)
    assert row.completion_tokens == sum(e.usage["completion_tokens"] for e in mine)


def _report(name: str, mine: list[Exchange], row: introspection.WakeRecord) -> None:
    """What the server received and what the row recorded (printed for the closing note: -s)."""
    asked = "; ".join(
        f"turn {n}: response_format offering {len(_offered(e))} tool(s) {_offered(e)}, {e.usage['prompt_tokens']} prompt tokens"
        for n, e in enumerate(mine, 1)
    )
    print(f"\n{name}: {asked}\n  row: turns={row.turns} tool_calls={row.tool_calls} refusals={row.refusals} "
          f"stop={row.stop_reason} tokens={row.prompt_tokens}+{row.completion_tokens}")


async def test_a_required_first_turn_calls_a_bound_tool_and_the_loop_goes_on_to_a_final_text(
    make_config: Callable[..., Config], proxy: RecordingProxy
) -> None:
    config = make_config()
    o = await _wake(config)
    assert o.status == "completed", o.error
    mine = proxy.completions()
    bound = sorted(t.name for t in o.binding)
    assert "tools" not in mine[0].request and _offered(mine[0]) == bound  # the binding, as the schema
    first = structured.parse(mine[0].choice["message"]["content"])
    assert first.tool in bound, mine[0].choice  # the grammar held the model to a call of a bound tool
    second = mine[1].request["messages"]
    assert second[-2] == {"role": "assistant", "content": mine[0].choice["message"]["content"]}
    assert second[-1]["role"] == "user" and second[-1]["content"].startswith(f"The tool {first.tool} answered:\n")
    assert "error" not in json.loads(marked.plain(second[-1]["content"].split("\n", 1)[1]))  # it ran: the answer is the tool's
    row = await _row(config, o.wake_id)
    _usage_agrees(row, mine)
    # a later turn's answer may be cut by what is left of the wake's output budget: that one, and only
    # that kind, is refused as unreadable
    cut = [e for e in mine[1:] if _offered(e) and e.choice["finish_reason"] == "length"
           and structured.parse(e.choice["message"]["content"], cut=True).problem]
    assert row.tool_calls >= 1 and row.refusals == len(cut) and row.stop_reason in llama_fixtures.SETTLED_STOPS, row.note
    assert o.final_text and row.final_text == o.final_text  # the loop reached a final text, by choice or by the summary
    if row.stop_reason != "done":  # the budget ended it: the summary call could only answer
        assert _offered(mine[-1]) == [] and mine[-1].request["response_format"]["json_schema"]["schema"] == structured.FINAL_BRANCH
    _report("required first turn", mine, row)


async def test_a_call_the_grammar_allows_but_the_binding_does_not_is_refused_and_counted(
    make_config: Callable[..., Config], proxy: RecordingProxy
) -> None:
    def widen(request: dict[str, Any]) -> dict[str, Any]:
        """Offer the model, on purpose, a tool this wake does not hold (as a server or a proxy
        that rewrote the schema might): its grammar then allows nothing else."""
        schema = request["response_format"]["json_schema"]["schema"]
        if "anyOf" not in schema and "final" in schema["properties"]:
            return request  # the summary call: left alone
        nothing = {"type": "object", "properties": {}, "additionalProperties": False}
        rogue = {"type": "object", "properties": {"tool": {"type": "string", "enum": ["rm_rf"]}, "arguments": nothing},
                 "required": ["tool", "arguments"], "additionalProperties": False}
        return {**request, "response_format": {"type": "json_schema", "json_schema": {"name": "wake_action", "schema": rogue}}}

    proxy.widen = widen
    config = make_config(budget="budget = { max_turns = 2, max_tool_calls = 2, max_output_tokens = 120, max_cost_usd = 1.0 }")
    o = await _wake(config)
    assert o.status == "completed", o.error
    mine = proxy.completions()
    assert structured.parse(mine[0].choice["message"]["content"]).tool == "rm_rf"  # the widened grammar made it ask
    refusal = mine[1].request["messages"][-1]
    assert refusal["role"] == "user" and "refused: tool 'rm_rf' is not bound in this wake" in refusal["content"]
    assert mine[1].status == 200  # a conversation with the refusal in it is one the server takes
    row = await _row(config, o.wake_id)
    assert row.refusals >= 1 and row.refusals == row.tool_calls  # every call was the rogue one
    async with stores.connected(config) as st, st.pg_conn() as conn:
        done, total = await actions.since(conn, "demo", T0 - dt.timedelta(days=3650), limit=5)
    assert total == 0  # nothing ran
    _report("widened grammar", mine, row)


async def test_a_mutating_call_lands_in_last_actions_under_the_wakes_fence(make_config: Callable[..., Config], proxy: RecordingProxy) -> None:
    config = make_config(binds='["live_write"]', choice='tool_choice = { first = "pin_note", later = "none" }')
    o = await _wake(config)
    assert o.status == "completed", o.error
    mine = proxy.completions()
    assert _offered(mine[0]) == ["pin_note"]
    call = structured.parse(mine[0].choice["message"]["content"])
    assert call.tool == "pin_note" and isinstance(call.arguments, dict), mine[0].choice
    assert all(_offered(e) == [] for e in mine[1:])  # `later = "none"`: the next turn could only answer
    row = await _row(config, o.wake_id)
    assert (row.tool_calls, row.refusals) == (1, 0)
    async with stores.connected(config) as st, st.pg_conn() as conn:
        done, total = await actions.since(conn, "demo", T0 - dt.timedelta(days=3650), limit=5)
        newest = await fences.newest(conn, "demo")
    assert total == 1 and done[0].tool == "pin_note" and done[0].wake_id == o.wake_id
    assert done[0].arguments == call.arguments and done[0].fence == row.fence == newest
    _report("mutating call", mine, row)


async def test_the_budgets_summary_call_offers_no_tool_and_ends_the_loop(make_config: Callable[..., Config], proxy: RecordingProxy) -> None:
    one_turn = "budget = { max_turns = 1, max_tool_calls = 4, max_output_tokens = 120, max_cost_usd = 1.0 }"
    config = make_config(choice='tool_choice = "required"', budget=one_turn)
    o = await _wake(config)
    assert o.status == "completed", o.error
    mine = proxy.completions()
    assert len(mine) == 2 and _offered(mine[0]) == sorted(t.name for t in o.binding)
    summary = mine[1].request
    assert summary["response_format"]["json_schema"]["schema"] == structured.FINAL_BRANCH
    assert summary["messages"][-1]["content"] == prompt.summary_request("max_turns")["content"]
    row = await _row(config, o.wake_id)
    assert row.stop_reason == "max_turns" and row.tool_calls == 1 and row.turns == 2  # the call's turn and the summary's
    assert row.prompt_tokens == sum(e.usage["prompt_tokens"] for e in mine)  # the summary's tokens are on the row too
    assert o.final_text is not None  # the summary's final answer, read from its JSON (cut or not)
    _report("budget summary", mine, row)


def _tokens(live: LiveLlama, text: str) -> int:
    req = urllib.request.Request(
        f"{live.root_url}/tokenize", data=json.dumps({"content": text}).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as res:
        return len(json.loads(res.read())["tokens"])


async def test_the_live_tiers_fit_the_models_window(
    make_config: Callable[..., Config], proxy: RecordingProxy, llama_server_info: LiveLlama
) -> None:
    """The first prompt of each live tier, in the model's own tokens, leaves room to answer; the
    whole wake binding's schema alone would take most of the window (why the tiers bind `live`)."""
    config = make_config(budget="budget = { max_turns = 1, max_tool_calls = 1, max_output_tokens = 64, max_cost_usd = 1.0 }", sources="")
    o = await _wake(config)
    assert o.status == "completed", o.error
    first = proxy.completions()[0]
    measured = first.usage["prompt_tokens"]
    assert measured + first.request["max_tokens"] <= llama_server_info.ctx
    registry = session.build_registry(config)
    whole = [prompt.tool_spec(t) for t in registry.binding(("wake.whisper", "wake.surface", "wake.full"))]
    whole_tokens = _tokens(llama_server_info, structured.declarations(whole))  # what the system message would carry
    print(f"\nlive tier first prompt: {measured} tokens of {llama_server_info.ctx}; the whole binding's declarations alone: {whole_tokens}")
    assert measured + whole_tokens > llama_server_info.ctx // 2  # binding everything would take most of the window
