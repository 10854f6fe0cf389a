"""The whisper gate and escalation rules as pure decisions over blocks, hashes and the diff."""

from __future__ import annotations

import uuid
from typing import Any

from ledgers.introspection import Compared
from tests.support import records
from wake.arrival.engine import Block, CacheTier
from wake.config import EscalationRule, GateConfig
from wake.think import gate
from wake.witness import diff

PREVIOUS_ID = uuid.UUID("12345678-0000-0000-0000-000000000000")


def _block(name: str, tier: CacheTier, *, result: str = "present", retrieval: str = "ok", every_wake: bool = False) -> Block:
    return Block(
        name=name, cache_tier=tier, text=name, retrieval=retrieval, result=result, reason=None, latency_ms=1.0, rows=1,
        changes_every_wake=every_wake,
    )


def _state(b: Block, h: str) -> dict[str, Any]:
    return b.state(h)


BLOCKS = [
    _block("identity", CacheTier.static),
    _block("threads", CacheTier.session),
    _block("recent_wakes", CacheTier.session, every_wake=True),
    _block("clock", CacheTier.volatile, every_wake=True),
]
HASHES = {"identity": "i1", "threads": "t1", "recent_wakes": "r1", "clock": "c1"}
TOOLS = {"local_time": "lt1"}
DEFAULT_GATE = GateConfig()


def _previous(hashes: dict[str, str], blocks: list[Block] = BLOCKS, status: str = "completed") -> Compared:
    import datetime as dt

    return records.compared(
        wake_id=PREVIOUS_ID, tier="whisper", status=status, started_at=dt.datetime(2026, 11, 29, tzinfo=dt.UTC),
        tool_hashes=TOOLS, blocks={b.name: _state(b, hashes[b.name]) for b in blocks},
    )


def _decide(
    blocks: list[Block], hashes: dict[str, str], previous: Compared | None, config: GateConfig = DEFAULT_GATE, tier: str = "whisper",
    tools: dict[str, str] = TOOLS,
) -> gate.Decision:
    states = {b.name: _state(b, hashes[b.name]) for b in blocks}
    return gate.decide(
        tier=tier, blocks=blocks, hashes=hashes, previous_tier=previous, tier_diff=diff.compare(previous, tools, states), config=config,
    )


def test_unchanged_whisper_is_quiet_even_though_the_clock_and_recent_wakes_moved() -> None:
    moved = {**HASHES, "clock": "c2", "recent_wakes": "r2"}
    d = _decide(BLOCKS, moved, _previous(HASHES))
    assert d.action == "quiet" and d.reason == "nothing changed since whisper 12345678, nothing due"


def test_a_changed_session_block_opens_the_gate_a_changed_static_one_does_not() -> None:
    assert _decide(BLOCKS, {**HASHES, "threads": "t2"}, _previous(HASHES)).reason == "changed: threads"
    assert _decide(BLOCKS, {**HASHES, "identity": "i2"}, _previous(HASHES)).action == "quiet"


def test_first_whisper_failed_previous_changed_tools_and_other_tiers_open() -> None:
    assert _decide(BLOCKS, HASHES, None).reason == "first whisper"
    assert _decide(BLOCKS, HASHES, _previous(HASHES, status="failed")).reason == "previous whisper ended failed"
    assert _decide(BLOCKS, HASHES, _previous(HASHES), tools={"local_time": "lt2"}).reason == "tools changed"
    assert _decide(BLOCKS, HASHES, _previous(HASHES), tier="surface").action == "open"


def test_a_present_due_block_keeps_the_whisper_awake() -> None:
    due = [*BLOCKS, _block("due_falsifiers", CacheTier.volatile)]
    hashes = {**HASHES, "due_falsifiers": "d1"}
    assert _decide(due, hashes, _previous(hashes, due)).reason == "due: due_falsifiers"
    empty = [*BLOCKS, _block("due_falsifiers", CacheTier.volatile, result="empty")]
    assert _decide(empty, hashes, _previous(hashes, empty)).action == "quiet"
    other = GateConfig(due_blocks=("inbox",))
    assert _decide(due, hashes, _previous(hashes, due), other).action == "quiet"


def test_escalation_rules_present_changed_and_newly_failing() -> None:
    config = GateConfig(escalate=(
        EscalationRule(when="present", block="due_falsifiers"),
        EscalationRule(when="changed", block="human_messages"),
        EscalationRule(when="newly_failing", to="full"),
    ))
    msgs = [*BLOCKS, _block("human_messages", CacheTier.volatile)]
    h = {**HASHES, "human_messages": "m1"}
    assert _decide(msgs, h, _previous(h, msgs), config).action == "quiet"  # the same message again: nothing new
    d = _decide(msgs, {**h, "human_messages": "m2"}, _previous(h, msgs), config)
    assert (d.action, d.reason, d.to) == ("escalate", "human_messages changed", "surface")
    failing = [*BLOCKS[:1], _block("threads", CacheTier.session, retrieval="failed", result="unknown"), *BLOCKS[2:]]
    d = _decide(failing, {**HASHES, "threads": "t9"}, _previous(HASHES), config)
    assert (d.action, d.reason, d.to) == ("escalate", "newly failing: threads", "full")
    due = [*BLOCKS, _block("due_falsifiers", CacheTier.volatile)]
    assert _decide(due, {**HASHES, "due_falsifiers": "d"}, None, config).reason == "due_falsifiers present"
