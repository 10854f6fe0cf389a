"""A replay against its recorded wake: the first decision that differs, the transcript's diff,
and the totals side by side (docs/replay.md, "The report").

A decision is one model turn: the calls it made (tool, canonical arguments), in order, or, on the
turn that made none, its final answer. Two runs make the same decisions when every turn's calls
and the final text are identical.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# How much of a diff the report keeps; the stored transcripts have the rest.
DIFF_MAX_LINES = 400
TEXT_MAX_CHARS = 2000


@dataclass(frozen=True, kw_only=True)
class Decided:
    """One call as the comparison sees it."""

    turn: int
    tool: str
    arguments: str  # canonical JSON


def _by_turn(calls: Sequence[Decided]) -> dict[int, list[Decided]]:
    turns: dict[int, list[Decided]] = {}
    for c in calls:
        turns.setdefault(c.turn, []).append(c)
    return turns


def _pretty(arguments: str) -> list[str]:
    try:
        return json.dumps(json.loads(arguments), indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    except ValueError:
        return arguments.splitlines()


def _clip(text: str | None) -> str | None:
    return text if text is None or len(text) <= TEXT_MAX_CHARS else text[:TEXT_MAX_CHARS] + f"…[{len(text)} characters]"


def first_divergence(
    recorded: Sequence[Decided], replayed: Sequence[Decided], recorded_final: str | None, replayed_final: str | None,
) -> dict[str, object] | None:
    """The first turn where the two runs decided differently (None: the same decisions throughout)."""
    old, new = _by_turn(recorded), _by_turn(replayed)
    for turn in range(1, max([0, *old, *new]) + 1):
        a, b = old.get(turn, []), new.get(turn, [])
        for n in range(max(len(a), len(b))):
            x, y = (a[n] if n < len(a) else None), (b[n] if n < len(b) else None)
            if x is not None and y is not None and (x.tool, x.arguments) == (y.tool, y.arguments):
                continue
            found: dict[str, object] = {
                "turn": turn, "kind": "call", "call": n,
                "recorded": None if x is None else {"tool": x.tool, "arguments": x.arguments},
                "replay": None if y is None else {"tool": y.tool, "arguments": y.arguments},
            }
            if x is not None and y is not None and x.tool == y.tool:
                found["arguments_diff"] = list(difflib.unified_diff(_pretty(x.arguments), _pretty(y.arguments), "recorded", "replay", lineterm=""))
            return found
    if (recorded_final or "") != (replayed_final or ""):
        turn = max([0, *old, *new]) + 1
        return {
            "turn": turn, "kind": "final", "recorded": _clip(recorded_final), "replay": _clip(replayed_final),
            "text_diff": list(difflib.unified_diff((recorded_final or "").splitlines(), (replayed_final or "").splitlines(),
                                                   "recorded", "replay", lineterm=""))[:DIFF_MAX_LINES],
        }
    return None


def _lines(messages: Sequence[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for m in messages:
        role = m.get("role", "?")
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {} if isinstance(call, dict) else {}
            out.append(f"[{role}] call {fn.get('name')} {fn.get('arguments')}")
        content = m.get("content")
        if isinstance(content, str) and content:
            out.extend(f"[{role}] {line}" for line in content.splitlines())
    return out


def transcript_diff(recorded: Sequence[dict[str, object]], replayed: Sequence[dict[str, object]], base: int = 2) -> list[str]:
    """A unified diff of the two conversations after the arrival (the first `base` messages)."""
    diff = list(difflib.unified_diff(_lines(recorded[base:]), _lines(replayed[base:]), "recorded", "replay", lineterm=""))
    return diff if len(diff) <= DIFF_MAX_LINES else [*diff[:DIFF_MAX_LINES], f"…[{len(diff) - DIFF_MAX_LINES} more lines]"]
