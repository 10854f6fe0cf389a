"""The compaction strategies over message lists: cuts at turn boundaries, the arrival and the newest turn kept."""

from __future__ import annotations

from typing import Any

from surfaces import conversation as c

ARRIVAL = [{"role": "system", "content": "sys"}, {"role": "user", "content": "arrive"}]


def _turns(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = list(ARRIVAL)
    for i in range(n):
        out.append({"role": "assistant", "content": f"thinking {i}", "tool_calls": [{"id": f"c{i}", "function": {"name": "bulk"}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"})
    return out


def _well_formed(messages: list[dict[str, Any]]) -> None:
    assert messages[:2] == ARRIVAL
    for i, m in enumerate(messages):
        if m["role"] == "tool":  # every tool answer follows the assistant turn that called it
            calls = next(p for p in reversed(messages[:i]) if p["role"] == "assistant")["tool_calls"]
            assert m["tool_call_id"] in {x["id"] for x in calls}


def test_sliding_window_keeps_at_most_n_messages_at_a_turn_start() -> None:
    msgs = _turns(5)
    cut = c.sliding_window(msgs, 2, keep_last=3)  # 3 would split a turn: the newest whole turn (2) stays
    _well_formed(cut.messages)
    assert cut.messages[2:] == msgs[-2:] and cut.removed == msgs[2:-2]


def test_the_newest_turn_is_kept_even_with_keep_last_one() -> None:
    msgs = _turns(3)
    cut = c.sliding_window(msgs, 2, keep_last=1)
    assert cut.messages[2:] == msgs[-2:]


def test_summarized_replaces_the_early_turns_with_one_message() -> None:
    msgs = _turns(4)
    cut = c.summarized(msgs, 2, 2, "I read four results.", "archive:w-seg-1")
    _well_formed(cut.messages)
    assert len(cut.messages) == 2 + 1 + 2 and "I read four results." in cut.messages[2]["content"]
    assert "archive:w-seg-1" in cut.messages[2]["content"] and len(cut.removed) == 6


def test_prune_keeps_the_calls_and_drops_results_and_reasoning_except_the_newest_turn() -> None:
    msgs = _turns(3)
    cut = c.prune_low_priority(msgs, 2, "archive:w-seg-1")
    _well_formed(cut.messages)
    assert [m.get("tool_calls") for m in cut.messages] == [m.get("tool_calls") for m in msgs]
    assert cut.messages[3]["content"].startswith("[pruned: 8 characters") and cut.messages[2]["content"] == ""
    assert cut.messages[-2:] == msgs[-2:] and len(cut.removed) == 4


def test_archive_segment_widens_to_whole_turns() -> None:
    msgs = _turns(4)
    cut = c.archive_segment(msgs, 2, first=1, last=2)  # inside turns 0 and 1: both go whole
    _well_formed(cut.messages)
    assert cut.removed == msgs[2:6] and cut.messages == msgs[:2] + msgs[6:]
