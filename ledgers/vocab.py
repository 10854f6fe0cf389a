"""The words the ledgers store: one type for each closed set of values, used everywhere.

Each is a `StrEnum`, so a member is the very string the database CHECKs accept (`Status.quiet ==
"quiet"`), JSON-encodes as that string and needs no conversion at the SQL boundary. A test keeps
these sets and the migrations' CHECK constraints the same.
"""

from __future__ import annotations

import enum


class Tier(enum.StrEnum):
    """The depth of a wake."""

    whisper = "whisper"
    surface = "surface"
    full = "full"


class Trigger(enum.StrEnum):
    """Why a wake ran. Only `schedule` and `catch_up` wakes have a slot; an `at` wake is a one-shot
    an operator asked for (`wake at`), claimed through its own row."""

    schedule = "schedule"
    manual = "manual"
    catch_up = "catch_up"
    escalation = "escalation"
    at = "at"


class Status(enum.StrEnum):
    """How a wake attempt ended (`started` while it runs)."""

    started = "started"
    completed = "completed"
    quiet = "quiet"
    failed = "failed"
    aborted = "aborted"
    halted = "halted"
    abandoned = "abandoned"
    skipped = "skipped"
    # a slot that did not run and never will: found later than its tier's misfire_grace_s, or one
    # PostgreSQL was unreachable for (recorded once it answers); one row, no wake
    missed = "missed"


class Retrieval(enum.StrEnum):
    """Whether an arrival source could look: `failed` is "could not check", never "nothing found"."""

    ok = "ok"
    failed = "failed"
    disabled = "disabled"


class Result(enum.StrEnum):
    """What a source found; `unknown` exactly when its retrieval was not `ok`."""

    present = "present"
    empty = "empty"
    unknown = "unknown"


class StopReason(enum.StrEnum):
    """Why a wake's model loop ended (`introspection.stop_reason`)."""

    done = "done"
    max_turns = "max_turns"
    max_tool_calls = "max_tool_calls"
    max_output_tokens = "max_output_tokens"
    max_cost_usd = "max_cost_usd"
    daily_cap = "daily_cap"
    context_window = "context_window"
    repeated_call = "repeated_call"
    error = "error"
    aborted = "aborted"
    gate = "gate"
    escalated = "escalated"
    cloister = "cloister"  # an open HALT finding (or a canary that could not run): no model call
    nothing_to_report = "nothing_to_report"  # the final answer was the tier's ok_token: quiet, tokens spent
    precheck = "precheck"  # the tier's pre-check ended the wake before the model


# Tiers that never wait for a busy agent: a whisper is cheap and the next one is minutes away.
NO_WAIT_TIERS: frozenset[Tier] = frozenset({Tier.whisper})
# Every status a settled wake can have: all but `started`, in the enum's order.
SETTLED: tuple[Status, ...] = tuple(s for s in Status if s is not Status.started)
# A settled wake that counts as success (`wake trigger`'s exit 0; the gate's "previous whisper").
GOOD: frozenset[Status] = frozenset({Status.completed, Status.quiet})
# A settled row of a wake that ran, well or not: the dead-man check's sign of life (docs/incidents.md).
# A `skipped` or `missed` slot did not run.
RAN: tuple[Status, ...] = (Status.completed, Status.quiet, Status.failed, Status.aborted, Status.halted, Status.abandoned)
