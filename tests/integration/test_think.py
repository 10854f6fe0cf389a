"""Steps 8-9 over real PostgreSQL, Redis and the scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from ledgers import actions, daybook, introspection
from surfaces.registry import Registry
from tests.support import marked, sessions, think_tools, wakes
from tests.support.openai_server import ScriptedServer, completion, error
from wake import stores
from wake.arrival import engine as arrival
from wake.arrival import sources
from wake.config import Config
from wake.run import cycle, session
from wake.think import budget, prompt

TOOLS = '[tools]\nmodules = ["tests.support.think_tools"]\n'
T0 = dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)


def _toml(
    server: ScriptedServer, *, budget_toml: str = "", daily_cap: str = "", extra: str = "", sources_toml: str = "", route: str = ""
) -> tuple[str, str]:
    extra_toml = f"""{TOOLS}
[models.scripted]
base_url = "{server.url}"
model = "scripted-1"
{route}
timeout_s = 2
max_retries = 1
retry_cap_s = 0.05
input_usd_per_mtok = 1.0
output_usd_per_mtok = 4.0

[think]
tool_timeout_s = 3  # long enough for a tool that succeeds on a loaded machine; `sleepy` sleeps 30 s
tool_result_max_chars = 200
max_repeat_calls = 2
{extra}
"""
    tiers = "".join(
        f"""
[agents.demo.tiers.{tier}]
binds = {binds}
model = "scripted"
{sources_toml}
{budget_toml}
"""
        for tier, binds in (("whisper", '["wake.whisper"]'), ("surface", '["wake.whisper", "wake.surface"]'))
    )
    agents = f'[agents.demo]\ntimezone = "Europe/Stockholm"\npersona_files = ["persona.md"]\n{daily_cap}\n{tiers}'
    return extra_toml, agents


@pytest.fixture
def make_config(store_config: Callable[..., Config], server: ScriptedServer) -> Callable[..., Config]:
    def make(**kw: Any) -> Config:
        extra, agents = _toml(server, **kw)
        return store_config(extra, agents=agents)

    return make


async def _wake(config: Config, tier: str = "surface", registry: Registry | None = None, **kw: Any) -> cycle.WakeOutcome:
    async with sessions.ready_stores(config) as st:
        return await wakes.run(config, st, registry or session.build_registry(config), agent_id="demo", tier=tier, **kw)


def _tool_answers(request_json: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        json.loads(marked.plain(m["content"])) if marked.plain(m["content"]).startswith("{") else {"text": marked.plain(m["content"])}
        for m in request_json["messages"] if m["role"] == "tool"
    ]


async def test_tool_call_round_trip_records_usage_and_the_mutating_action(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config()
    server.push(
        completion(None, [("local_time", {})]),
        completion(None, [("note_write", {"text": "saw nothing new"})]),
        completion("Checked the time, wrote a note. Nothing else is open."),
    )
    o = await _wake(config)
    assert o.status == "completed", o.error
    assert len(server.requests) == 3
    bound = sorted(t.name for t in o.binding)
    assert all(r.tool_names == bound for r in server.requests)  # exactly the binding, every turn
    second = server.requests[1].json
    assert _tool_answers(second)[0]["timezone"] == "Europe/Stockholm"
    assert _tool_answers(server.requests[2].json)[1] == {"written": "saw nothing new"}
    assert think_tools.CALLS == [("note_write", {"text": "saw nothing new"})]
    row = await wakes.record(config, o.wake_id)
    assert (row.model, row.turns, row.tool_calls, row.refusals, row.stop_reason) == ("scripted-1", 3, 2, 0, "done")
    assert row.final_text == o.final_text == "Checked the time, wrote a note. Nothing else is open."
    async with stores.connected(config) as st, st.pg_conn() as conn:
        entries, total = await daybook.recent(conn, "demo", limit=5)
    assert total == 1 and (entries[0].entry, entries[0].wake_id) == (o.final_text, o.wake_id)  # the daybook entry
    assert row.prompt_tokens == sum(len(r.raw) // 4 for r in server.requests) and row.completion_tokens > 0
    assert row.cached_tokens > 0  # turns 2 and 3 extend turn 1's body: a shared prefix
    expected_cost = ((row.prompt_tokens - row.cached_tokens) * 1.0 + row.cached_tokens * 1.0 + row.completion_tokens * 4.0) / 1e6
    assert float(row.cost_usd) == pytest.approx(expected_cost, abs=1e-8)
    async with stores.connected(config) as st, st.pg_conn() as conn:
        done, total = await actions.since(conn, "demo", T0 - dt.timedelta(days=3650), limit=5)
    assert total == 1 and done[0].tool == "note_write" and done[0].wake_id == o.wake_id
    assert done[0].surface == "wake.surface" and done[0].arguments == {"text": "saw nothing new"}


async def test_a_tool_outside_the_binding_is_refused_logged_and_counted(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config()
    server.push(
        completion("I need more tools.", [("chat_only", {}), ("rm_rf", {"path": "/"}), ("wake_history", {})]),
        completion("Fine, I will do without."),
    )
    with structlog.testing.capture_logs() as logged:
        o = await _wake(config, "whisper")
    assert o.status == "completed"
    answers = _tool_answers(server.requests[1].json)
    assert [a["error"].split(":")[0] for a in answers] == ["refused"] * 3
    assert "you hold:" in answers[0]["error"]
    assert think_tools.CALLS == []
    assert server.requests[1].tool_names == server.requests[0].tool_names  # asking did not widen it
    assert "wake_history" not in (server.requests[0].tool_names or [])
    refused = [e for e in logged if e["event"] == "tool.refused"]
    assert sorted(e["tool"] for e in refused) == ["chat_only", "rm_rf", "wake_history"]
    row = await wakes.record(config, o.wake_id)
    assert (row.tool_calls, row.refusals) == (3, 3)


async def test_malformed_and_invalid_arguments_are_answered_as_errors(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config()
    server.push(
        completion(None, [("note_write", "{not json"), ("note_write", {"text": 7}), ("note_write", {}), ("note_write", "[1, 2]")]),
        completion("Gave up on notes."),
    )
    o = await _wake(config)
    answers = [a["error"] for a in _tool_answers(server.requests[1].json)]
    assert answers[0].startswith("arguments are not valid JSON")
    assert answers[1].startswith("arguments do not match the schema at text: 7 is not of type 'string'")
    assert answers[2].startswith("arguments do not match the schema at (top level): 'text' is a required property")
    assert answers[3] == "arguments must be a JSON object"
    assert think_tools.CALLS == [] and o.status == "completed"
    row = await wakes.record(config, o.wake_id)
    assert (row.tool_calls, row.refusals, row.stop_reason) == (4, 0, "done")


async def test_handler_failure_timeout_and_oversized_result_become_tool_answers(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config()
    server.push(completion(None, [("explode", {}), ("sleepy", {}), ("chatty", {})]), completion("Done despite it all."))
    o = await _wake(config)
    assert o.status == "completed", o.error
    explode, sleepy, chatty = [marked.plain(m["content"]) for m in server.requests[1].json["messages"] if m["role"] == "tool"]
    assert json.loads(explode)["error"] == "the tool failed: RuntimeError: kaboom"
    assert json.loads(sleepy)["error"] == "the tool timed out after 3.0s"
    assert chatty.startswith("x" * 200) and chatty.endswith("…[truncated: 200 of 1000 characters shown]")


async def test_budget_exhaustion_ends_with_one_summary_call_without_tools(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(budget_toml="budget = { max_turns = 2, max_tool_calls = 10, max_output_tokens = 4096, max_cost_usd = 1.0 }")
    server.push(
        completion(None, [("local_time", {})]),
        completion(None, [("note_write", {"text": "one"})]),
        completion("Summary: checked the time and wrote one note; the budget ran out."),
    )
    o = await _wake(config)
    assert len(server.requests) == 3
    assert server.requests[1].tool_names is not None
    last = server.requests[2].json
    assert last["tool_choice"] == "none" and last["messages"][-1]["role"] == "user"  # no tool callable
    assert last["tools"] == server.requests[1].json["tools"]  # kept, so the prompt cache still hits
    assert server.requests[2].raw.startswith(server.requests[1].raw.split(b', "tool_choice"')[0][:-1])  # up to the messages' "]"
    assert "budget is spent (max_turns)" in last["messages"][-1]["content"]
    assert last["max_tokens"] == config.think.summary_max_tokens
    row = await wakes.record(config, o.wake_id)
    assert (row.turns, row.stop_reason, row.status) == (3, "max_turns", "completed")
    assert row.final_text == "Summary: checked the time and wrote one note; the budget ran out."


async def test_tool_call_budget_and_the_repeat_breaker(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(budget_toml="budget = { max_turns = 8, max_tool_calls = 2, max_output_tokens = 4096, max_cost_usd = 1.0 }")
    server.push(completion(None, [("local_time", {}), ("note_write", {"text": "a"}), ("note_write", {"text": "b"})]), completion("summary"))
    o = await _wake(config)
    answers = [marked.plain(m["content"]) for m in server.requests[1].json["messages"] if m["role"] == "tool"]
    assert json.loads(answers[2])["error"] == "not run: this wake's tool-call budget is spent"
    assert server.requests[1].json["tool_choice"] == "none"
    assert (await wakes.record(config, o.wake_id)).stop_reason == "max_tool_calls"

    config = make_config(
        budget_toml="budget = { max_turns = 8, max_tool_calls = 10, max_output_tokens = 4096, max_cost_usd = 1.0 }",
        route='summary_tools = "omit"',
    )
    server.push(*[completion(None, [("local_time", {})])] * 3, completion("summary after the breaker", [("local_time", {})]))
    again = await _wake(config)
    assert "tools" not in server.requests[-1].json and "tool_choice" not in server.requests[-1].json
    row = await wakes.record(config, again.wake_id)
    assert row.stop_reason == "repeated_call" and row.final_text == "summary after the breaker"
    assert row.turns == 4 and row.tool_calls == 3  # the third identical call tripped it (max_repeat_calls = 2)
    assert len(server.requests) == 2 + 4  # the tool call in the summary reply was not run


async def test_max_output_tokens_is_passed_down_and_ends_the_loop(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(budget_toml="budget = { max_turns = 8, max_tool_calls = 10, max_output_tokens = 20, max_cost_usd = 1.0 }")
    server.push(completion("x" * 40, [("local_time", {})]), completion("short summary"))
    o = await _wake(config)
    assert server.requests[0].json["max_tokens"] == 20
    assert (await wakes.record(config, o.wake_id)).stop_reason == "max_output_tokens"


async def test_the_daily_cap_holds_across_wakes_and_resets_at_local_midnight(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config(daily_cap="daily_cost_cap_usd = 0.001")
    evening = dt.datetime(2026, 11, 29, 22, 40, tzinfo=dt.UTC)  # 23:40 in Stockholm
    server.push(completion("first", cost=0.0006), completion("second", cost=0.0006))
    first = await _wake(config, now=lambda: evening)
    second = await _wake(config, now=lambda: evening + dt.timedelta(minutes=5))
    assert (first.status, second.status, len(server.requests)) == ("completed", "completed", 2)
    third = await _wake(config, now=lambda: evening + dt.timedelta(minutes=10))
    assert third.status == "halted" and len(server.requests) == 2  # no call at all
    row = await wakes.record(config, third.wake_id)
    assert row.stop_reason == "daily_cap" and row.turns == 0 and "daily cost cap reached ($0.0012 of $0.0010 today)" in row.note
    async with stores.connected(config) as st:
        key = budget.cost_key("demo", "Europe/Stockholm", evening)
        assert key == "wake:cost:demo:2026-11-29"
        assert int(await st.redis.get(key)) == 1200 and 0 < await st.redis.ttl(key) <= budget.COST_KEY_TTL_S
    after_midnight = evening + dt.timedelta(minutes=25)  # 00:05 on the 30th in Stockholm, still the 29th in UTC
    server.push(completion("a new day", cost=0.0006))
    fourth = await _wake(config, now=lambda: after_midnight)
    assert fourth.status == "completed" and fourth.final_text == "a new day" and len(server.requests) == 3


async def test_the_daily_cap_survives_a_flush_of_redis_and_a_counter_behind_the_ledger(
    make_config: Callable[..., Config], server: ScriptedServer,
) -> None:
    """Issue 41: the counter is a cache of the ledger. Spent to the cap, Redis flushed (a restart
    without persistence), the next wake is still refused; so is one after a failover to a replica
    whose counter missed the last INCRBY (a counter behind the ledger)."""
    config = make_config(daily_cap="daily_cost_cap_usd = 0.001")
    noon = dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC)
    server.push(completion("first", cost=0.0006), completion("second", cost=0.0006))
    first = await _wake(config, now=lambda: noon)
    second = await _wake(config, now=lambda: noon + dt.timedelta(minutes=5))
    assert (first.status, second.status, len(server.requests)) == ("completed", "completed", 2)
    key = budget.cost_key("demo", "Europe/Stockholm", noon)
    async with stores.connected(config) as st:
        await st.redis.flushall()
    flushed = await _wake(config, now=lambda: noon + dt.timedelta(minutes=10))
    async with stores.connected(config) as st:
        rebuilt = int(await st.redis.get(key))
        await st.redis.set(key, 100)  # a replica that missed the INCRBYs
    behind = await _wake(config, now=lambda: noon + dt.timedelta(minutes=15))
    assert (flushed.status, behind.status, len(server.requests)) == ("halted", "halted", 2)  # no model call after the cap
    assert "daily cost cap reached ($0.0012 of $0.0010 today)" in (await wakes.record(config, flushed.wake_id)).note
    assert rebuilt == 1200


async def test_a_failing_model_settles_the_wake_failed_never_empty(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config()
    server.push(error(401, "invalid api key"))
    o = await _wake(config)
    assert o.status == "failed" and "HTTP 401" in (o.error or "")
    row = await wakes.record(config, o.wake_id)
    assert (row.status, row.stop_reason, row.final_text) == ("failed", "error", None)
    assert "invalid api key" in row.error


async def test_a_missing_api_key_credential_fails_the_wake_with_its_name(
    make_config: Callable[..., Config], server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAKE_TEST_ABSENT_KEY", raising=False)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    config = make_config()
    route = config.models["scripted"].model_copy(update={"api_key_credential": "wake_test_absent_key"})
    config = config.model_copy(update={"models": {"scripted": route}})
    o = await _wake(config)
    assert o.status == "failed" and "credential 'wake_test_absent_key' not found" in (o.error or "")
    assert server.requests == []


def _fixed_source(name: str, tier: arrival.CacheTier, text: str, rows: int = 1) -> arrival.Source:
    async def fn(ctx: Any) -> arrival.Found:
        return arrival.Found(text=text, rows=rows)

    return arrival.Source(name=name, cache_tier=tier, fn=fn)


async def test_the_gate_a_second_identical_whisper_makes_zero_requests(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = make_config()
    threads = _fixed_source("open_threads", arrival.CacheTier.session, "- reply to Ada about the lease")
    base = [
        sources.BUILTIN["identity"], threads, sources.BUILTIN["daybook"], sources.BUILTIN["clock"], sources.BUILTIN["recent_wakes"],
        sources.BUILTIN["binding_diff"],
    ]
    first = await _wake(config, "whisper", source_list=base, now=lambda: T0)
    assert first.status == "completed" and len(server.requests) == 1
    assert first.final_text  # its daybook entry changes the next arrival's daybook block: the agent's own words are not news
    with structlog.testing.capture_logs() as logged:
        second = await _wake(config, "whisper", source_list=base, now=lambda: T0 + dt.timedelta(minutes=15))
    assert second.status == "quiet" and len(server.requests) == 1  # zero requests
    assert any(e["event"] == "gate.quiet" for e in logged)
    row = await wakes.record(config, second.wake_id)
    assert (row.prompt_tokens, row.completion_tokens, row.turns, row.stop_reason) == (0, 0, 0, "gate")
    assert row.note.startswith(f"gate: nothing changed since whisper {str(first.wake_id)[:8]}")
    third = await _wake(config, "whisper", source_list=base, now=lambda: T0 + dt.timedelta(minutes=30))
    assert third.status == "quiet" and len(server.requests) == 1  # quiet after quiet
    changed = [*base[:1], _fixed_source("open_threads", arrival.CacheTier.session, "- reply to Ada\n- a new thread"), *base[2:]]
    fourth = await _wake(config, "whisper", source_list=changed, now=lambda: T0 + dt.timedelta(minutes=45))
    assert fourth.status == "completed" and len(server.requests) == 2 and fourth.gate == "changed: open_threads"
    due = [*changed, _fixed_source("due_falsifiers", arrival.CacheTier.volatile, "1 falsifier due")]
    await _wake(config, "whisper", source_list=due, now=lambda: T0 + dt.timedelta(minutes=60))
    fifth = await _wake(config, "whisper", source_list=due, now=lambda: T0 + dt.timedelta(minutes=75))
    assert fifth.gate == "due: due_falsifiers" and fifth.status == "completed" and len(server.requests) == 4


async def test_escalation_promotes_a_whisper_to_a_surface_wake(
    make_config: Callable[..., Config], server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        sources.BUILTIN, "due_falsifiers", _fixed_source("due_falsifiers", arrival.CacheTier.volatile, "retraction 12: falsifier due"),
    )
    config = make_config(
        extra='[[gate.escalate]]\nwhen = "present"\nblock = "due_falsifiers"\n',
        sources_toml='sources = ["identity", "clock", "due_falsifiers", "binding_diff"]',
    )
    server.push(completion("Checked the falsifier of retraction 12: it holds."))
    o = await _wake(config, "whisper")
    assert o.status == "completed" and o.note == "escalated to surface: due_falsifiers present"
    assert o.escalated is not None and o.escalated.tier == "surface" and o.escalated.trigger == "escalation"
    assert len(server.requests) == 1 and "wake_history" in (server.requests[0].tool_names or [])  # the surface binding
    whisper_row, surface_row = await wakes.record(config, o.wake_id), await wakes.record(config, o.escalated.wake_id)
    assert (whisper_row.stop_reason, whisper_row.turns, whisper_row.escalation_cause) == ("escalated", 0, None)
    assert surface_row.trigger == "escalation"
    assert surface_row.escalation_cause == f"whisper {str(o.wake_id)[:8]}: due_falsifiers present"
    assert surface_row.final_text == "Checked the falsifier of retraction 12: it holds."


async def test_prefix_stability_only_the_clock_changed(make_config: Callable[..., Config], server: ScriptedServer, tmp_path: Path) -> None:
    config = make_config()
    persona = Path(__file__).resolve().parents[2] / "wake" / "config" / "default" / "agents" / "demo" / "persona.md"
    (tmp_path / "persona.md").write_text(persona.read_text() * 6)  # a persona of realistic length
    fixed = [sources.BUILTIN["identity"], _fixed_source("open_threads", arrival.CacheTier.session, "- reply to Ada"), sources.BUILTIN["clock"]]
    await _wake(config, source_list=fixed, now=lambda: T0)
    await _wake(config, source_list=fixed, now=lambda: T0 + dt.timedelta(hours=1, minutes=7))
    a, b = server.requests[0].raw, server.requests[1].raw
    assert a != b
    share = prompt.shared_prefix_share(a, b)
    assert share >= 0.90, share
    print(f"shared prefix {share:.3f} of {len(b)} bytes")
    assert b"Now: " in a[int(len(a) * share) - 200 :]  # the first difference is in the clock block
    assert server.requests[1].json["messages"][0] == server.requests[0].json["messages"][0]  # the system message


async def test_a_wake_cancelled_mid_loop_keeps_what_it_spent_on_the_row(make_config: Callable[..., Config], server: ScriptedServer) -> None:
    import asyncio

    from tests.support.openai_server import Response

    config = make_config()
    server.push(completion(None, [("local_time", {})], cost=0.0003), Response(body=completion("too late").body, delay_s=1.5))
    async with sessions.ready_stores(config) as st:
        task = asyncio.create_task(wakes.run(config, st, session.build_registry(config), agent_id="demo", tier="surface"))

        async def second_request() -> None:
            while len(server.requests) < 2:
                await asyncio.sleep(0.02)

        await asyncio.wait_for(second_request(), 120)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with st.pg_conn() as conn:
            [recent] = await introspection.recent(conn, agent_id="demo")
    row = await wakes.record(config, recent.wake_id)
    assert (row.status, row.stop_reason, row.turns, row.tool_calls) == ("aborted", "aborted", 1, 1)
    assert float(row.cost_usd) == 0.0003 and row.prompt_tokens > 0
