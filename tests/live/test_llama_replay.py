"""A recorded wake replayed on a real llama.cpp server (SmolLM2-135M, greedy sampling, no prompt
cache): the same route makes the same decisions (every call and the final answer), and changed
instructions are reported with the first turn that differs. The server is the live tests' own
(tests/support/llama_fixtures.py): without it these tests skip and say why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support import llama_fixtures, wakes
from tests.support.llama_fixtures import LiveLlama
from tests.support.recording_proxy import Exchange, RecordingProxy
from wake import stores
from wake.config import Config
from wake.replay import recording
from wake.replay.run import Candidate, Outcome, replay
from wake.run import cycle, session
from wake.stores import prepared
from wake.think.client import Client

pytestmark = pytest.mark.live


@pytest.fixture
def config(store_config: Callable[..., Config], proxy: RecordingProxy, llama_server_info: LiveLlama) -> Config:
    live = llama_server_info
    extra = llama_fixtures.tools_and_route(live, proxy.url, name="llama_json", extra_body="temperature = 0, seed = 7, cache_prompt = false")
    agents = """[agents.demo]
timezone = "Europe/Stockholm"
persona_files = ["persona.md"]

[agents.demo.tiers.surface]
binds = ["live"]
# What is replayed is the model loop: an arrival of two blocks keeps each prompt short (prompt
# evaluation on a CPU is most of this test's time, and the prompt cache is off here)
sources = ["identity", "clock"]
model = "llama_json"
tool_choice = { first = "required", later = "auto" }
budget = { max_turns = 2, max_tool_calls = 2, max_output_tokens = 120, max_cost_usd = 1.0 }
"""
    return store_config(extra, agents=agents)


def _answer(exchange: Exchange) -> tuple[object, object]:
    """What a chat completion decided: its text and its calls (not its id, time or usage)."""
    message: dict[str, Any] = exchange.choice.get("message") or {}
    calls = [(c.get("function", {}).get("name"), c.get("function", {}).get("arguments")) for c in message.get("tool_calls") or []]
    return message.get("content"), calls


async def _record(config: Config) -> cycle.WakeOutcome:
    async with stores.connected(config) as st:
        await prepared.prepare_schema(st)
        return await wakes.run(config, st, session.build_registry(config), agent_id="demo", tier="surface")


async def _replay(config: Config, o: cycle.WakeOutcome, candidate: Candidate) -> Outcome:
    async with stores.connected(config) as st:
        async with st.pg_conn() as conn:
            recorded = await recording.read(conn, o.wake_id)
        client = Client()
        try:
            return await replay(st, config, session.build_registry(config), recorded, candidate, client)
        finally:
            await client.aclose()


async def test_the_same_route_makes_the_same_decisions_and_changed_instructions_name_the_first_divergent_turn(
    config: Config, proxy: RecordingProxy,
) -> None:
    o = await _record(config)
    assert o.status == "completed", o.error
    recorded_requests = len(proxy.completions())
    same = await _replay(config, o, Candidate())
    exchanges = proxy.completions()
    recorded, replayed = exchanges[:recorded_requests], exchanges[recorded_requests:]
    assert replayed[0].request == recorded[0].request  # the recorded first request, rebuilt from the ledger
    assert same.record.request_matches is True
    assert same.record.out_of_recording == 0
    # Every later request is the recorded one too, byte for byte, as long as the server answered
    # each identical request identically. Greedy decoding on a CPU is deterministic on paper; if the
    # server once broke a near tie the other way (CI saw it once, in a final answer), the report must
    # name the turn whose answer differed, not claim the same decisions.
    first_different = None
    for turn, (a, b) in enumerate(zip(recorded, replayed, strict=False), start=1):
        assert b.request == a.request, f"turn {turn}: the replay did not send the recorded request"
        if _answer(b) != _answer(a):
            first_different = turn
            break
    if first_different is None:
        assert len(replayed) == len(recorded)
        assert same.record.report["same_decisions"] is True, same.record.report["first_divergence"]
    else:
        div = same.record.report["first_divergence"]
        assert same.record.report["same_decisions"] is False and div is not None and div["turn"] == first_different, div

    # Changed instructions alone need not change what a 135M model decides (greedy decoding may
    # well make the same calls), so the candidate also clips the summary to 16 tokens (the recorded one runs to 43): the final
    # answer must then differ, and the report must name the first turn that does.
    clipped = config.model_copy(update={"think": config.think.model_copy(update={"summary_max_tokens": 16})})
    changed = await _replay(config, o, Candidate(
        instructions="Ignore the tools. Answer only with the single word PINEAPPLE, in capitals.", instructions_path="pineapple.md",
        config=clipped, config_path="clipped.toml",
    ))
    div = changed.record.report["first_divergence"]
    assert changed.record.request_matches is False
    assert div is not None and div["turn"] >= 1, changed.record.report
    if div["kind"] == "call":
        assert changed.calls != same.calls
        assert changed.calls[: div["call"]] == same.calls[: div["call"]] or div["turn"] > 1
    else:
        assert div["kind"] == "final", div
        assert changed.calls == same.calls  # every call the same: the answer is the first difference
        assert div["recorded"] == same.record.final_text and div["replay"] == changed.record.final_text
        assert div["recorded"] != div["replay"]
    print(f"\nlive replay: same route same decisions over {same.record.turns} turn(s); changed instructions first diverge at "
          f"turn {div['turn']} ({div['kind']})")
