"""The blocks that change on every wake say what they mean in few bytes (docs/performance.md,
"The whisper's volatile tail"): the binding diff gives the time of the last wake only where
"N min ago" is not already exact, and a time on the wake's own day carries no date."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import Any

from ledgers.introspection import Diff, WakeDiff
from untrusted import spotlight as marks
from wake.arrival import sources
from wake.arrival.engine import Block, CacheTier, prompt_order
from wake.think import prompt
from wake.witness import diff

NOW = dt.datetime(2026, 11, 30, 9, 30, tzinfo=dt.UTC)  # 10:30 CET
ZONE = "Europe/Stockholm"


def _diff(minutes_ago: float, wake_id: str = "a") -> dict[str, Any]:
    return {
        "first": False,
        "against": {"wake_id": wake_id, "tier": "whisper", "started_at": (NOW - dt.timedelta(minutes=minutes_ago)).isoformat()},
        "tools": {"added": [], "removed": [], "changed": [], "held": 7},
        "blocks": {"changed": ["clock"], "unchanged": [], "newly_failing": [], "recovered": [], "added": [], "removed": []},
    }


def _both(agent: dict[str, Any], tier: dict[str, Any]) -> WakeDiff:
    return WakeDiff(agent=Diff.from_json(agent), tier=Diff.from_json(tier))


def test_a_gap_under_two_hours_is_given_in_minutes_alone() -> None:
    text = diff.render(_both(_diff(15), _diff(15)), "whisper", ZONE, NOW)
    assert text.splitlines() == ["Since your last wake (whisper, 15 min ago):", "- tools: unchanged (7 held)", "- blocks changed: clock"]
    # on a regular schedule the diff is byte-identical from one wake to the next
    later = NOW + dt.timedelta(minutes=15)
    moved = {**_diff(15), "against": {**_diff(15)["against"], "started_at": (later - dt.timedelta(minutes=15)).isoformat()}}
    assert diff.render(_both(moved, moved), "whisper", ZONE, later) == text


def test_a_longer_gap_keeps_the_time_beside_the_rounded_one() -> None:
    text = diff.render(_both(_diff(150), _diff(60 * 30, wake_id="b")), "surface", ZONE, NOW)
    assert text.splitlines()[0] == "Since your last wake (whisper, 2026-11-30 08:00, 2 h ago):"
    assert "Since your last surface wake (2026-11-29 04:30, 30 h ago):" in text


def test_a_time_on_the_wakes_own_day_carries_no_date() -> None:
    zone = zoneinfo.ZoneInfo(ZONE)
    today = NOW.astimezone(zone).date()
    assert sources._local_time(NOW - dt.timedelta(hours=10), zone, today) == "00:30"
    assert sources._local_time(NOW - dt.timedelta(hours=11), zone, today) == "2026-11-29 23:30"
    assert sources.RECENT_WAKES_HEAD.format(held=7) == "Your last wakes, newest first (today unless dated; 7 tools, as now, unless stated):"


def test_the_blocks_that_move_with_the_clock_come_last_in_the_user_message() -> None:
    from wake.arrival.engine import Block, CacheTier
    from wake.think import prompt

    def b(name: str, tier: CacheTier, *, every: bool = False, clock: bool = False) -> Block:
        return Block(name=name, cache_tier=tier, text=name, retrieval="ok", result="present", reason=None, latency_ms=0, rows=1,
                     changes_every_wake=every, moves_with_clock=clock)

    blocks = [
        b("identity", CacheTier.static), b("daybook", CacheTier.session, every=True), b("recent_wakes", CacheTier.session, every=True, clock=True),
        b("facts", CacheTier.session), b("clock", CacheTier.volatile, every=True, clock=True), b("binding_diff", CacheTier.volatile, every=True),
        b("settled", CacheTier.volatile),
    ]
    system, user = prompt.messages(blocks, marks.for_agent("demo"))
    assert system["content"].endswith("## identity\nidentity")
    assert [line[3:] for line in user["content"].splitlines() if line.startswith("## ")] == [
        "facts", "settled", "daybook", "binding_diff", "recent_wakes", "clock",
    ]
    # the built-in sources that move with the clock say so
    assert {n for n, s in sources.BUILTIN.items() if s.moves_with_clock} == {"clock", "recent_wakes", "posture"}


def test_the_recorded_arrival_order_is_the_order_the_model_reads() -> None:
    # `arrival_order` on the row and `wake up --dry-run` use `prompt_order`; the request uses
    # `prompt.messages`: the two must agree, every-wake and clock-bound blocks included.
    def block(name: str, tier: CacheTier, *, every: bool = False, clock: bool = False) -> Block:
        return Block(name=name, cache_tier=tier, text=name, retrieval="ok", result="present", reason=None, latency_ms=0.0, rows=1,
                     changes_every_wake=every, moves_with_clock=clock)

    blocks = [
        block("clock", CacheTier.volatile, every=True, clock=True), block("identity", CacheTier.static),
        block("recent_wakes", CacheTier.session, every=True, clock=True), block("daybook", CacheTier.session, every=True),
        block("facts", CacheTier.stable), block("cloister", CacheTier.volatile), block("binding_diff", CacheTier.volatile, every=True),
        block("commitments", CacheTier.session),
    ]
    sent = [line.removeprefix("## ") for m in prompt.messages(blocks, marks.for_agent("demo"))
            for line in m["content"].splitlines() if line.startswith("## ")]
    assert sent == [b.name for b in prompt_order(blocks)]
    assert sent == ["identity", "facts", "commitments", "cloister", "daybook", "binding_diff", "recent_wakes", "clock"]


def test_the_arrival_writes_every_time_one_way() -> None:
    from wake import clock

    at = dt.datetime(2026, 11, 29, 23, 30, tzinfo=dt.UTC)
    assert clock.stamp(at, "Europe/Stockholm") == "2026-11-30 00:30" and clock.day(at, "Europe/Stockholm") == "2026-11-30"
    assert clock.stamp(at, "UTC") == "2026-11-29 23:30"
