"""Context pressure over real PostgreSQL, Redis and the scripted model server: the policies'
thresholds, declines, every compaction strategy, the archive, budgets meeting a compaction."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from ledgers import context_events
from tests.support import marked, sessions, wakes
from tests.support.openai_server import Recorded, ScriptedServer, completion
from wake import stores
from wake.config import Config
from wake.run import cycle, session
from wake.think import pressure

WINDOW = 18000


def _config(store_config: Callable[..., Config], server: ScriptedServer, *, context: str = "", max_turns: int = 30) -> Config:
    extra = f"""[tools]
modules = ["tests.support.pressure_tools"]

[models.scripted]
base_url = "{server.url}"
tokenizer_url = "{server.root_url}"
model = "scripted-1"
context_window = {WINDOW}
timeout_s = 5
max_retries = 0

[think]
tool_result_max_chars = 40000
max_repeat_calls = 50
"""
    agents = f"""[agents.demo]
timezone = "UTC"

[agents.demo.context]
{context}

[agents.demo.tiers.full]
binds = ["wake"]
model = "scripted"
sources = ["clock"]

[agents.demo.tiers.full.budget]
max_turns = {max_turns}
max_tool_calls = 60
max_output_tokens = 8000
max_cost_usd = 10
"""
    return store_config(extra, agents=agents)


async def _wake(config: Config, wake_id: uuid.UUID | None = None) -> tuple[cycle.WakeOutcome, list[context_events.Turn], list[context_events.Event]]:
    async with sessions.ready_stores(config) as st:
        outcome = await wakes.run(config, st, session.build_registry(config), agent_id="demo", tier="full", wake_id=wake_id or uuid.uuid4())
        async with st.pg_conn() as conn:
            turns = await context_events.turns(conn, outcome.wake_id)
            events = list(reversed(await context_events.recent(conn, "demo", since=dt.datetime(2000, 1, 1, tzinfo=dt.UTC), limit=500)))
    return outcome, turns, [e for e in events if e.wake_id == outcome.wake_id]


def _bulk_turns(server: ScriptedServer, n: int, start: int = 0) -> None:
    server.push(*(completion(tool_calls=[("bulk", {"n": start + i})]) for i in range(n)))


def _completions(server: ScriptedServer) -> list[Recorded]:
    return [r for r in server.requests if not r.json["messages"][0]["content"].startswith("Summarize the following")]


def _prompt_tokens(r: Recorded, server: ScriptedServer) -> int:
    """The request's prompt as the scripted server's tokenizer counts it (its template is the JSON body)."""
    body = {k: v for k, v in r.json.items() if k not in ("model", "max_tokens")}
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()) // server.bytes_per_token


def _fits(server: ScriptedServer) -> None:
    """No request exceeded the window: its prompt, as the server counts it, plus max_tokens."""
    assert server.requests
    for r in server.requests:
        assert _prompt_tokens(r, server) + r.json["max_tokens"] <= WINDOW


def _first_at(turns: list[context_events.Turn], threshold: float) -> int:
    return next(t.turn for t in turns if t.pressure >= threshold)


def _reminder_turns(server: ScriptedServer) -> list[int]:
    """The turns (1-based requests) whose newest message is a pressure reminder."""
    return [i + 1 for i, r in enumerate(_completions(server)) if str(r.json["messages"][-1]["content"]).startswith("[wake: c")]


async def test_sovereign_narrows_then_reminds_then_offers_a_choice_at_the_right_turns(
    store_config: Callable[..., Config], server: ScriptedServer,
) -> None:
    config = _config(store_config, server)
    _bulk_turns(server, 40)
    outcome, turns, events = await _wake(config)
    kinds = {e.kind: e for e in events}
    assert set(kinds) >= {"narrowed", "reminded", "choice"}
    # Each event fires on the first turn whose pressure before the call passed its threshold:
    # the turn before was sent below it.
    for kind, threshold in (("narrowed", 0.70), ("reminded", 0.85), ("choice", 0.95)):
        e = kinds[kind]
        assert e.pressure_before >= threshold
        assert turns[e.turn - 2].pressure < threshold
    assert _reminder_turns(server) == [kinds["reminded"].turn, kinds["choice"].turn]
    assert "Choose one: compact" in _completions(server)[kinds["choice"].turn - 1].json["messages"][-1]["content"]
    # From narrow_at on, max_tokens is at most half the room left, below what it would have been
    # (the room, or what the budget leaves: 8000 less each turn's completion); before, it is that.
    narrowed_at = kinds["narrowed"].turn
    for t in turns:
        room, budget_left = WINDOW - t.prompt_tokens, 8000 - 40 * t.turn
        if t.turn >= narrowed_at:
            assert t.max_tokens <= max(1, room // 2) < min(room, budget_left)
        else:
            assert t.max_tokens >= min(room, budget_left)
    assert not [e for e in events if e.kind in ("compacted", "auto_compacted")]  # nothing forced
    async with stores.connected(config) as st, st.pg_conn() as conn:
        assert await context_events.peak(conn, outcome.wake_id) == max(t.pressure for t in turns)
    # The pressure recorded is the server's own count of what was sent.
    assert [t.prompt_tokens for t in turns] == [_prompt_tokens(r, server) for r in server.requests]
    assert outcome.thinking is not None and outcome.thinking.stop_reason == "context_window"
    _fits(server)


async def test_harness_warns_at_080_and_088_and_compacts_at_tier3_only(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = _config(store_config, server, context='policy = "harness"', max_turns=30)
    _bulk_turns(server, 30)
    _, turns, events = await _wake(config)
    reminded = [e for e in events if e.kind == "reminded"]
    autos = [e for e in events if e.kind == "auto_compacted"]
    assert [e.detail["level"] for e in reminded[:2]] == [1, 2]
    for e, threshold in zip(reminded[:2], (0.80, 0.88), strict=True):
        assert e.pressure_before >= threshold > turns[e.turn - 2].pressure
    assert autos, "the harness compacts at tier3"
    for a in autos:
        assert a.pressure_before >= 0.95 and a.pressure_after < a.pressure_before
        assert a.reason.startswith(f"Auto-compacted at {round(a.pressure_before * 100)}% pressure. Agent was warned at ")
    # Never below tier3: every turn that did not compact was sent with the window kept, and every
    # automatic compaction happened on a turn whose pressure had reached 0.95.
    assert not [e for e in events if e.kind in ("narrowed", "choice")]
    _fits(server)


async def test_harness_never_compacts_below_tier3(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = _config(store_config, server, context='policy = "harness"', max_turns=6)
    _bulk_turns(server, 6)
    _, turns, events = await _wake(config)
    assert max(t.pressure for t in turns) < 0.95
    assert not [e for e in events if e.kind == "auto_compacted"]


async def test_a_decline_holds_reminders_for_exactly_the_grace_turns(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = _config(store_config, server, context="remind_at = [0.30, 0.99]\ndecline_grace_turns = 2")
    _bulk_turns(server, 6)
    # The reminder at 0.30 comes first; decline it, then keep filling the window.
    server.push(completion(tool_calls=[("ignore_compaction", {"reason": "mid-thought"})]))
    _bulk_turns(server, 8, start=100)
    _, _, events = await _wake(config)
    first = next(e for e in events if e.kind == "reminded")
    declined = next(e for e in events if e.kind == "declined")
    again = [e for e in events if e.kind == "reminded" and e.turn > declined.turn]
    assert declined.reason == "mid-thought" and declined.turn > first.turn
    assert again[0].turn == declined.turn + 2 + 1  # held through exactly 2 turns, back on the third
    assert again[0].detail["declines"] == 1
    assert "URGENT" in _completions(server)[again[0].turn - 1].json["messages"][-1]["content"]


@pytest.mark.parametrize("strategy", ["sliding-window", "summarize", "prune-low-priority", "archive-segment"])
async def test_each_strategy_lowers_the_next_request_and_the_segment_can_be_read_back(
    store_config: Callable[..., Config], server: ScriptedServer, strategy: str,
) -> None:
    config = _config(store_config, server)
    wake_id = uuid.uuid4()
    _bulk_turns(server, 5)
    args: dict[str, Any] = {"strategy": strategy, "keep_last": 2, "reason": "tidy"}
    if strategy == "archive-segment":
        args |= {"first": 0, "last": 5}
    server.push(completion(tool_calls=[("context_compact", args)]))
    if strategy == "summarize":
        server.push(completion("I looked at five bulk results; nothing is open."))  # the summary call's reply
    ref = f"archive:{wake_id}-seg-1"
    server.push(completion(tool_calls=[("archive_search", {"ref": ref})]), completion("done"))
    outcome, _, events = await _wake(config, wake_id)
    sent = _completions(server)
    before, after = sent[5], sent[6]  # the request that asked for the compaction, and the next one
    assert len(after.raw) < len(before.raw)
    compacted = next(e for e in events if e.kind == "compacted")
    assert compacted.strategy == strategy and compacted.pressure_after < compacted.pressure_before
    assert compacted.detail["ref"] == ref
    if strategy == "summarize":
        summaries = [r for r in server.requests if r not in sent]
        assert len(summaries) == 1
        assert "I looked at five bulk results" in json.dumps(after.json["messages"])
    answer = json.loads(marked.plain(sent[7].json["messages"][-1]["content"]))
    assert answer["ref"] == ref and answer["messages"], "the archived segment reads back"
    assert outcome.status == "completed"
    _fits(server)


async def test_a_budget_spent_after_a_summarize_compaction_still_gets_its_summary_call(
    store_config: Callable[..., Config], server: ScriptedServer,
) -> None:
    config = _config(store_config, server, max_turns=4)
    _bulk_turns(server, 2)
    server.push(
        completion(tool_calls=[("context_compact", {"strategy": "summarize", "keep_last": 2})]),
        completion("Two bulk results read."),  # the compaction's summary
        completion(tool_calls=[("bulk", {"n": 9})]),
        completion("Daybook: read bulk results, compacted once."),  # the wake's closing summary, tools off
    )
    outcome, _, events = await _wake(config)
    assert outcome.thinking is not None and outcome.thinking.stop_reason == "max_turns"
    assert [e.kind for e in events if e.kind == "compacted"] == ["compacted"]
    last = server.requests[-1].json
    assert last.get("tool_choice") == "none" and "budget is spent" in last["messages"][-1]["content"]
    assert len(server.requests) == 6  # four turns, the compaction's summary, the closing summary
    assert outcome.final_text == "Daybook: read bulk results, compacted once."


async def test_config_set_within_bounds_takes_effect_and_out_of_bounds_is_refused(
    store_config: Callable[..., Config], server: ScriptedServer,
) -> None:
    config = _config(store_config, server, context="agent_max_threshold = 0.9")
    server.push(
        completion(tool_calls=[("context_config_set", {"key": "act_at", "value": "0.99"})]),
        completion(tool_calls=[("context_config_set", {"key": "narrow_at", "value": "0.6", "reason": "earlier"})]),
        completion(tool_calls=[("context_status", {})]),
        completion("done"),
    )
    _, _, events = await _wake(config)
    answers = [json.loads(marked.plain(r.json["messages"][-1]["content"])) for r in server.requests[1:4]]
    assert answers[0]["error"].endswith("refused: act_at 0.99 is above the bound context.agent_max_threshold = 0.9")
    assert answers[1] == {"key": "narrow_at", "value": 0.6, "previous": 0.7}
    assert answers[2]["settings"]["narrow_at"] == 0.6
    # The agent reads its own events back: this wake's, and the audit's counts.
    assert answers[2]["this_wake"] == ["turn 2: config_set narrow_at=0.6"]
    assert answers[2]["audit_last_7_days"] == {"config_set": 1} and answers[2]["turn"] == 3
    assert [(e.kind, e.detail["key"]) for e in events if e.kind == "config_set"] == [("config_set", "narrow_at")]
    async with stores.connected(config) as st, st.pg_conn() as conn:
        own = await context_events.settings(conn, "demo")
    assert pressure.effective(config.agents["demo"].context, own)["narrow_at"] == 0.6


async def test_memory_status_reports_the_context_and_memory_search_reads_an_archived_segment(
    store_config: Callable[..., Config], server: ScriptedServer
) -> None:
    """`memory status` carries the context section; `memory search archive:<wake>-seg-<n>` reads
    the archive, and a bad ref is refused in one line (the memory tools delegate to the context tools)."""
    from surfaces import memory_tools
    from surfaces.errors import ToolInputError
    from tests.support.ledger_ctx import wake_ctx
    from wake.arrival import memory_blocks as arrival_memory

    config = _config(store_config, server)
    wake_id = uuid.uuid4()
    at = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            await context_events.archive(
                conn, wake_id=wake_id, segment=1, agent_id="demo", strategy="archive-segment",
                messages=[{"role": "tool", "content": "the long tool result"}], at=at,
            )
        ctx = wake_ctx(config, st, at)
        state = await arrival_memory.open_memory(config, st, ctx.request, at, dry_run=False)
        ctx = dataclasses.replace(ctx, memory_state=state)
        found = await memory_tools.memory_read.handler(ctx, command="search", query=f"archive:{wake_id}-seg-1")
        status = await memory_tools.memory_read.handler(ctx, command="status")
        with pytest.raises(ToolInputError, match="expected archive:"):
            await memory_tools.memory_read.handler(ctx, command="search", query="archive:nonsense")
    assert "the long tool result" in json.dumps(found)
    assert set(status["context"]) >= {"pressure", "last_compaction", "audit_last_7_days"}
