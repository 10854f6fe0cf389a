"""One wake's conversation as the context tools see it: its messages, its pressure, what was asked.

The model loop owns a `Conversation` and hands it to tools through `ToolContext.conversation`.
A tool never edits the messages while a turn is being answered (the API needs every call of an
assistant turn answered in order): `context_compact` *requests* a compaction, and the loop applies
it once the turn's answers are in, before the next request. The strategies themselves are pure
functions over the message list, here, so that the loop, the tools and the tests share one
definition of what each removes.

The messages before `base` are the arrival (the system message and the first user message); no
strategy touches them. Cuts fall only at the start of a turn (an assistant message), so a tool
answer is never separated from the call it answers, and the newest turn is always kept whole.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

STRATEGIES = ("sliding-window", "summarize", "prune-low-priority", "archive-segment", "defer")
PRUNED = "[pruned: {chars} characters; retrieve with archive_search {ref}]"

Message = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Request:
    """A compaction the agent asked for (applied by the loop before the next model call)."""

    strategy: str
    keep_last: int = 6
    first: int | None = None  # archive-segment: the range of conversation messages, 0-based after the arrival
    last: int | None = None
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Cut:
    """What a strategy did: the new messages and the segment it removed (or rewrote)."""

    messages: list[Message]
    removed: list[Message]


@dataclass
class Conversation:
    """The live state of one wake's conversation and its context pressure."""

    messages: list[Message]
    base: int  # messages before this index are the arrival and are never compacted
    context_window: int
    policy: str
    wake_ref: str  # the wake id, as archive references name it
    turn: int = 0
    pressure: float = 0.0
    peak: float = 0.0
    pending: Request | None = None
    declined_until: int = -1  # reminders are held through this turn
    declines: int = 0
    reminded_level: int = 0
    next_segment: int = 1
    events: list[str] = field(default_factory=list)  # what happened this wake, for context_status
    # Reads the agent's effective thresholds (operator config + the agent's own settings).
    settings: dict[str, Any] = field(default_factory=dict)
    summarizer: Callable[[list[Message]], Awaitable[str]] | None = None

    def archive_ref(self, segment: int) -> str:
        return f"archive:{self.wake_ref}-seg-{segment}"

    def in_grace(self) -> bool:
        return self.turn <= self.declined_until


def turn_starts(messages: list[Message], base: int) -> list[int]:
    """Indexes (>= base) where a turn starts: each assistant message."""
    return [i for i in range(base, len(messages)) if messages[i].get("role") == "assistant"]


def _cut_before(messages: list[Message], base: int, keep_last: int) -> int:
    """The cut index that keeps at most `keep_last` messages (at least the newest turn), at a turn start."""
    starts = turn_starts(messages, base)
    if not starts:
        return base
    target = len(messages) - max(1, keep_last)
    fitting = [s for s in starts if s >= target]
    return fitting[0] if fitting else starts[-1]


def sliding_window(messages: list[Message], base: int, keep_last: int) -> Cut:
    cut = _cut_before(messages, base, keep_last)
    return Cut(messages=messages[:base] + messages[cut:], removed=messages[base:cut])


def summarized(messages: list[Message], base: int, keep_last: int, summary: str, ref: str) -> Cut:
    cut = _cut_before(messages, base, keep_last)
    if cut == base:
        return Cut(messages=list(messages), removed=[])
    note = {"role": "user", "content": f"[wake: summary of {cut - base} earlier messages of this wake, archived as {ref}]\n{summary}"}
    return Cut(messages=messages[:base] + [note] + messages[cut:], removed=messages[base:cut])


def prune_low_priority(messages: list[Message], base: int, ref: str) -> Cut:
    """Tool results and the assistant's reasoning text go, the calls stay (the newest turn is kept whole)."""
    starts = turn_starts(messages, base)
    end = starts[-1] if starts else base
    out = list(messages)
    removed: list[Message] = []
    for i in range(base, end):
        m = messages[i]
        content = m.get("content")
        if m.get("role") == "tool" and isinstance(content, str) and not content.startswith("[pruned"):
            removed.append(m)
            out[i] = {**m, "content": PRUNED.format(chars=len(content), ref=ref)}
        elif m.get("role") == "assistant" and m.get("tool_calls") and content:
            removed.append(m)
            out[i] = {**m, "content": ""}
    return Cut(messages=out, removed=removed)


def archive_segment(messages: list[Message], base: int, first: int, last: int) -> Cut:
    """Remove conversation messages `first`..`last` (0-based after the arrival), widened to whole turns."""
    starts = turn_starts(messages, base)
    if not starts:
        return Cut(messages=list(messages), removed=[])
    lo = max([s for s in starts if s <= base + first] or [starts[0]])
    after = [s for s in starts if s > base + last]
    hi = after[0] if after else starts[-1]  # the newest turn always stays
    if hi <= lo:
        return Cut(messages=list(messages), removed=[])
    return Cut(messages=messages[:lo] + messages[hi:], removed=messages[lo:hi])


def size(messages: list[Message]) -> int:
    return len(json.dumps(messages, ensure_ascii=False).encode())
