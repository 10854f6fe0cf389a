"""What real OpenAI-compatible servers (llama.cpp first) need from the model loop, over the
scripted server on loopback, real PostgreSQL and Redis: each case is one a real server exposed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import structlog

from ledgers import daybook
from tests.support import agents as agent_configs
from tests.support import wakes
from tests.support.openai_server import ScriptedServer, completion, error
from wake import stores
from wake.config import Config, ModelRoute
from wake.run import cycle
from wake.think import loop as think
from wake.think import prompt
from wake.think.client import Client

# An output budget larger than any room left, so each request's max_tokens is the room itself.
ROOMY = "budget = { max_turns = 8, max_tool_calls = 10, max_output_tokens = 1000000, max_cost_usd = 1.0 }"


@pytest.fixture
def make_config(store_config: Callable[..., Config], server: ScriptedServer) -> Callable[..., Config]:
    def make(route: str = "", budget_toml: str = "") -> Config:
        extra = agent_configs.tools("think_tools") + agent_configs.scripted(server.url, lines=[route], timeout_s=2, max_retries=2, retry_cap_s=0.05)
        agents = agent_configs.toml(tiers={"surface": f"{agent_configs.SURFACE}\n{budget_toml}"}, extra=[agent_configs.PERSONA])
        return store_config(extra, agents=agents)

    return make


async def _wake(config: Config) -> cycle.WakeOutcome:
    return await wakes.once(config, tier="surface")


def _sized(request_json: dict[str, Any]) -> int:
    """The bytes the loop measured: the body before `model` and `max_tokens` are added."""
    body = {k: v for k, v in request_json.items() if k not in ("model", "max_tokens")}
    return len(prompt.body_bytes(body))


async def test_a_tool_only_turn_is_sent_back_with_empty_content_and_tools_say_auto(
    make_config: Callable[..., Config], server: ScriptedServer
) -> None:
    server.push(completion(None, [("local_time", {})]), completion("Checked the time."))
    o = await _wake(make_config())
    assert o.status == "completed", o.error
    first, second = (r.json for r in server.requests)
    assert first["tool_choice"] == "auto" and second["tool_choice"] == "auto" and first["tools"]
    [assistant] = [m for m in second["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "local_time"


async def test_extra_body_never_overrides_what_wake_sets(server: ScriptedServer) -> None:
    # config refuses these keys at load; a route built around the validation still cannot win
    route = ModelRoute.model_construct(**{
        **ModelRoute(base_url=server.url, model="scripted-1", timeout_s=2).model_dump(),
        "extra_body": {"model": "other", "max_tokens": 1, "tools": [], "tool_choice": "required", "temperature": 0},
    })
    client = Client()
    try:
        await client.complete(route, {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                                      "tool_choice": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16})
    finally:
        await client.aclose()
    sent = server.requests[0].json
    assert (sent["model"], sent["max_tokens"], sent["tool_choice"], len(sent["tools"])) == ("scripted-1", 16, "auto", 1)
    assert sent["temperature"] == 0  # anything else still goes through


async def test_an_answer_cut_at_its_token_limit_settles_truncated_and_says_so(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config()
    server.push(completion("I looked at the lease and then I", finish_reason="length"))
    o = await _wake(config)
    assert o.status == "completed" and len(server.requests) == 1  # no summary call after it
    row = await wakes.record(config, o.wake_id)
    assert row.stop_reason == "truncated" and "stopped: truncated" in row.note
    assert row.final_text == "I looked at the lease and then I" + think.CUT_OFF
    async with stores.connected(config) as st, st.pg_conn() as conn:
        entries, total = await daybook.recent(conn, "demo", limit=5)
    assert total == 1 and entries[0].entry.endswith(think.CUT_OFF)


async def test_a_summary_cut_at_its_token_limit_is_marked_too(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(budget_toml="budget = { max_turns = 1, max_tool_calls = 10, max_output_tokens = 4096, max_cost_usd = 1.0 }")
    server.push(completion(None, [("local_time", {})]), completion("Summary: checked the ti", finish_reason="length"))
    o = await _wake(config)
    row = await wakes.record(config, o.wake_id)
    assert row.stop_reason == "max_turns" and "the summary was cut off at its token limit" in row.note
    assert row.final_text == "Summary: checked the ti" + think.CUT_OFF


async def test_the_prompt_fits_a_tokenizer_denser_than_four_bytes_a_token(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    server.bytes_per_token = 3  # usage.prompt_tokens = body bytes / 3
    probe = make_config()
    server.push(completion("probe"))
    await _wake(probe)
    window = len(server.requests[0].raw) * 13 // 30  # the first prompt takes 77% of it (4 bytes a token would say 58%)
    config = make_config(route=f"context_window = {window}", budget_toml=ROOMY)
    server.push(completion(None, [("local_time", {})]), completion(None, [("note_write", {"text": "x" * 300})]), completion("done"))
    o = await _wake(config)
    assert o.status == "completed", o.error
    turns = server.requests[1:]
    assert len(turns) >= 2
    for r in turns:
        assert len(r.raw) // 3 + r.json["max_tokens"] <= window, (len(r.raw) // 3, r.json["max_tokens"], window)


async def test_later_turns_start_from_the_servers_own_count(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    server.bytes_per_token = 2  # denser than the estimate: only the server's count keeps it right
    config = make_config(route="context_window = 60000", budget_toml=ROOMY)
    server.push(completion(None, [("local_time", {})]), completion("done"))
    await _wake(config)
    first, second = (r.json for r in server.requests)
    assert first["max_tokens"] == 60000 - think.estimate_tokens(_sized(first), 2) - think.TEMPLATE_TOKENS_BASE
    counted = len(server.requests[0].raw) // 2
    added = think.estimate_tokens(_sized(second) - _sized(first), len(second["messages"]) - len(first["messages"]))
    assert second["max_tokens"] == 60000 - counted - added


async def test_a_tokenizer_url_counts_every_prompt_on_the_server(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    server.bytes_per_token = 2
    # A window the prompt fills to well under the narrowing threshold: max_tokens is all the room.
    config = make_config(route=f'tokenizer_url = "{server.root_url}"\ncontext_window = 30000', budget_toml=ROOMY)
    server.push(completion(None, [("local_time", {})]), completion("done"))
    o = await _wake(config)
    assert o.status == "completed", o.error
    assert [r.path for r in server.side_requests] == ["/apply-template", "/tokenize"] * 2
    for n, r in enumerate(server.requests):
        rendered = server.side_requests[2 * n].json
        assert rendered["messages"] == r.json["messages"] and rendered["tools"] == r.json["tools"]
        counted = len(server.side_requests[2 * n].raw) // 2  # the scripted template renders the body as it came
        assert r.json["max_tokens"] == 30000 - counted


async def test_a_tokenizer_that_cannot_answer_falls_back_to_the_estimate(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(route=f'tokenizer_url = "{server.root_url}/nowhere"\ncontext_window = 60000', budget_toml=ROOMY)
    server.push(completion("done"))
    with structlog.testing.capture_logs() as logged:
        o = await _wake(config)
    assert o.status == "completed", o.error
    failed = [e for e in logged if e["event"] == "model.count_failed"]
    assert len(failed) == 1 and "404" in failed[0]["error"]
    sent = server.requests[0].json
    assert sent["max_tokens"] == 60000 - think.estimate_tokens(_sized(sent), 2) - think.TEMPLATE_TOKENS_BASE


async def test_a_repeated_500_is_retried_and_the_row_says_what_it_cost(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config()
    body = "Invalid tool schema: cannot compile the pattern of due_on to a grammar"
    server.push(*[error(500, body)] * 3)
    with structlog.testing.capture_logs() as logged:
        o = await _wake(config)
    assert o.status == "failed" and len(server.requests) == 3  # 5xx is still retried (max_retries = 2)
    retries = [e for e in logged if e["event"] == "model.retry"]
    assert [e["same_error"] for e in retries] == [1, 2] and all(body in e["error"] for e in retries)
    row = await wakes.record(config, o.wake_id)
    assert body in row.error and row.error.endswith("(the same error on 3 of 3 attempts)")
    assert row.note == "model call failed after 3 attempt(s), the same error on 3 of them; 3 request(s) in this wake"
    assert row.stop_reason == "error"
