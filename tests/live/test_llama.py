"""The model loop against a real llama.cpp server (SmolLM2-135M-Instruct), through a recording
proxy on loopback, with real PostgreSQL and Redis. Every assertion is on the harness: what it
sent, what it recorded, what it refused; never on what the model said.

The server renders tools with a ChatML template (tests.support.llama_server.TOOL_TEMPLATE). The
tool-call tests are in tests/live/test_llama_tools.py: they call tools through a JSON schema the
server enforces, so they cannot skip for what the model chose (native calls from this 135M model
came only when nudged with a logit bias, and not for every prompt; `tool_choice: "required"` is
not enforced by this llama.cpp).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledgers import context_events, daybook, introspection
from tests.support import llama_fixtures, sessions, wakes
from tests.support.llama_fixtures import LiveLlama
from tests.support.recording_proxy import Exchange, RecordingProxy
from wake import stores
from wake.arrival import sources
from wake.config import Config
from wake.run import cycle, session
from wake.think import loop as think

pytestmark = pytest.mark.live

T0 = dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)
SMALL = "budget = { max_turns = 2, max_tool_calls = 4, max_output_tokens = 48, max_cost_usd = 1.0 }"
TWO_BLOCKS = 'sources = ["identity", "clock"]'


@pytest.fixture
def make_config(store_config: Callable[..., Config], proxy: RecordingProxy, llama_server_info: LiveLlama) -> Callable[..., Config]:
    live = llama_server_info

    def make(*, tiers: str, counted: bool = False, window: int | None = None) -> Config:
        tokenizer = f'tokenizer_url = "{proxy.root_url}"' if counted else ""
        route = f"""
base_url = "{proxy.url}"
model = "{live.model}"
context_window = {window or live.ctx}
timeout_s = 600
max_retries = 0
{tokenizer}
"""
        extra = f"""[tools]
surfaces = ["quiet", "live", "live_write"]
modules = ["tests.support.live_tools"]

[think]
summary_max_tokens = 16

[models.llama]
{route}
extra_body = {{ temperature = 0 }}
"""
        agents = f'[agents.demo]\ntimezone = "Europe/Stockholm"\npersona_files = ["persona.md"]\n{tiers}'
        return store_config(extra, agents=agents)

    return make


def _tier(tier: str, binds: str, route: str = "llama", budget: str = SMALL, extra: str = "") -> str:
    return f'\n[agents.demo.tiers.{tier}]\nbinds = {binds}\nmodel = "{route}"\n{budget}\n{extra}\n'


async def _wake(config: Config, tier: str, **kw: Any) -> cycle.WakeOutcome:
    async with sessions.ready_stores(config) as st:
        return await wakes.run(config, st, session.build_registry(config), agent_id="demo", tier=tier, **kw)


async def _row(config: Config, wake_id: Any) -> introspection.WakeRecord:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        row = await introspection.get(conn, wake_id)
    assert row is not None
    return row


def _inside_the_window(exchanges: list[Exchange], ctx: int) -> None:
    """The server's own count of every prompt, plus the most it was allowed to generate, fits its context."""
    assert exchanges
    for e in exchanges:
        assert e.status == 200, e.response
        assert e.usage["prompt_tokens"] + e.request["max_tokens"] <= ctx, (e.usage, e.request["max_tokens"], ctx)


def _cached(e: Exchange) -> int:
    return int((e.usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))


async def test_whisper_surface_and_full_wakes_complete_and_record_the_servers_usage(
    make_config: Callable[..., Config], proxy: RecordingProxy, llama_server_info: LiveLlama
) -> None:
    # Each tier binds the whisper tools: the whole wake registry's declarations no longer fit the small
    # model's own 8,192-token context (the harness would stop the wake before its first call, rightly).
    config = make_config(
        tiers=_tier("whisper", '["wake.whisper"]') + _tier("surface", '["wake.whisper"]') + _tier("full", '["wake.whisper"]')
    )
    seen = 0
    for n, tier in enumerate(("whisper", "surface", "full")):
        o = await _wake(config, tier, now=lambda n=n: T0 + dt.timedelta(hours=n))
        mine = proxy.completions()[seen:]
        seen += len(mine)
        row = await _row(config, o.wake_id)
        assert o.status == "completed" and row.status == "completed", (o.error, row.note)
        assert row.stop_reason in llama_fixtures.SETTLED_STOPS, row.note
        assert row.turns == len(mine) >= 1
        assert row.prompt_tokens == sum(e.usage["prompt_tokens"] for e in mine)
        assert row.completion_tokens == sum(e.usage["completion_tokens"] for e in mine)
        assert row.cached_tokens == sum(_cached(e) for e in mine)
        if n > 0:  # the system message (preamble, persona) is the previous wake's prefix: the slot's cache serves it
            assert row.cached_tokens > 0, row
        offered = sorted(t.name for t in o.binding)
        assert all(sorted(t["function"]["name"] for t in e.request.get("tools", [])) == offered for e in mine[:1])
        assert all(e.request.get("tool_choice") in ("auto", "none") for e in mine if e.request.get("tools"))
        _inside_the_window(mine, llama_server_info.ctx)


async def test_a_second_unchanged_whisper_makes_no_request(make_config: Callable[..., Config], proxy: RecordingProxy) -> None:
    config = make_config(tiers=_tier("whisper", '["wake.whisper"]'))
    fixed = [
        sources.BUILTIN["identity"],
        sources.BUILTIN["daybook"],
        sources.BUILTIN["clock"],
        sources.BUILTIN["recent_wakes"],
        sources.BUILTIN["binding_diff"],
    ]
    first = await _wake(config, "whisper", source_list=fixed, now=lambda: T0)
    sent = len(proxy.completions())
    assert first.status == "completed" and sent >= 1, first.error
    second = await _wake(config, "whisper", source_list=fixed, now=lambda: T0 + dt.timedelta(minutes=15))
    assert second.status == "quiet" and len(proxy.completions()) == sent  # zero requests
    row = await _row(config, second.wake_id)
    assert (row.stop_reason, row.turns, row.prompt_tokens) == ("gate", 0, 0)


async def test_an_answer_cut_at_its_token_limit_is_recorded_truncated(make_config: Callable[..., Config], proxy: RecordingProxy) -> None:
    one_token = "budget = { max_turns = 2, max_tool_calls = 0, max_output_tokens = 1, max_cost_usd = 1.0 }"
    config = make_config(tiers=_tier("whisper", '["quiet"]', budget=one_token))  # no tool declares `quiet`: none offered
    o = await _wake(config, "whisper")
    [e] = proxy.completions()
    assert "tools" not in e.request and e.request["max_tokens"] == 1
    assert e.choice["finish_reason"] == "length"  # the server cut it
    row = await _row(config, o.wake_id)
    assert (row.status, row.stop_reason) == ("completed", "truncated")
    if row.final_text is not None:
        assert row.final_text.endswith(think.CUT_OFF)
        async with stores.connected(config) as st, st.pg_conn() as conn:
            entries, _ = await daybook.recent(conn, "demo", limit=1)
        assert entries[0].entry.endswith(think.CUT_OFF)


@pytest.mark.parametrize("counted", [False, True], ids=["estimated", "tokenize"])
async def test_the_prompt_never_exceeds_the_context_window(
    make_config: Callable[..., Config], proxy: RecordingProxy, llama_server_info: LiveLlama, tmp_path: Path, counted: bool
) -> None:
    # The route's window, half the server's: the harness is held to it by the server's own count
    # of every prompt, and a prompt past half of it costs the CPU half what the server's would.
    window = llama_server_info.ctx // 2
    roomy = "budget = { max_turns = 3, max_tool_calls = 6, max_output_tokens = 100000, max_cost_usd = 1.0 }"
    config = make_config(tiers=_tier("full", '["wake.whisper"]', budget=roomy), counted=counted, window=window)
    proxy.max_tokens_cap = 64  # the room asked for is recorded; the server need not fill it
    # A persona that takes the first prompt past half of the window: the estimate (2.5 bytes a
    # token, these tokenize at 3.4-3.9) still leaves room, the exact count leaves the rest.
    # (32 times, not 40, since the spotlighting marks and their system note came into the prompt)
    persona = "I keep the lease ledger honest and answer Ada within the hour. " * 32
    (tmp_path / "persona.md").write_text(persona)
    o = await _wake(config, "full")
    row = await _row(config, o.wake_id)
    assert o.status == "completed", (o.error, row.note)
    exchanges = proxy.completions()
    _inside_the_window(exchanges, window)
    assert exchanges[0].usage["prompt_tokens"] > window // 2  # the test means something: the prompt takes most of the window
    if counted:
        counts = [e for e in proxy.exchanges if e.path == "/tokenize"]
        assert len(counts) >= len(exchanges)
        assert exchanges[0].usage["prompt_tokens"] + exchanges[0].request["max_tokens"] >= window - 8  # exact: nothing wasted
    print(
        f"{'tokenize' if counted else 'estimated'}: "
        + ", ".join(f"{e.usage['prompt_tokens']}+{e.request['max_tokens']}" for e in exchanges)
        + f" of {window}"
    )


async def test_a_full_wake_past_085_is_reminded_and_every_request_stays_inside_the_window(
    make_config: Callable[..., Config], proxy: RecordingProxy, llama_server_info: LiveLlama,
) -> None:
    # The first wake measures the arrival prompt on the server; the second gets a route window the
    # prompt fills to about 0.87, so the reminder is due before its first call.
    # A few tools keep the prompt well inside the small model's own context; pressure is of the route's window.
    # Two blocks arrive: the pressure is of the route's window, whatever fills it.
    probe = make_config(tiers=_tier("full", '["wake.whisper"]', extra=TWO_BLOCKS), counted=True)
    await _wake(probe, "full")
    first = proxy.completions()[0].usage["prompt_tokens"]
    window = int(first / 0.87)
    config = make_config(tiers=_tier("full", '["wake.whisper"]', extra=TWO_BLOCKS), counted=True, window=window)
    seen = len(proxy.completions())
    o = await _wake(config, "full", now=lambda: T0 + dt.timedelta(days=1))
    mine = proxy.completions()[seen:]
    _inside_the_window(mine, window)
    async with stores.connected(config) as st, st.pg_conn() as conn:
        turns = await context_events.turns(conn, o.wake_id)
        events = await context_events.recent(conn, "demo", since=T0, limit=50)
    assert turns and turns[0].counted == "server" and turns[0].pressure > 0.85
    kinds = {e.kind for e in events if e.wake_id == o.wake_id and e.turn == 1}
    assert kinds >= {"narrowed", "reminded"}, kinds
    assert mine[0].request["messages"][-1]["content"].startswith("[wake: context pressure")


def test_the_servers_threads_wait_passively(llama_server_info: LiveLlama) -> None:
    """wake.model.embedded starts llama-server with OMP_WAIT_POLICY=passive: its threads do not spin
    on the core a busy machine's other work needs (the figures are in embedded.py)."""
    if llama_server_info.pid is None:
        pytest.skip("WAKE_TEST_LLAMA_URL names a server this session did not start")
    environ = Path(f"/proc/{llama_server_info.pid}/environ").read_bytes().split(b"\0")
    assert b"OMP_WAIT_POLICY=passive" in environ
