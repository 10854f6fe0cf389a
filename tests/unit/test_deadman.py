"""The dead-man check's decision as a pure function of the schedule and the instants given
(wake.daemon.deadman, docs/incidents.md): two slots due past the tier's grace since its sign of
life make it overdue; a paused tier is not; slots outside active hours or in skipped quiet hours
are not due; a pause held back since is a sign of life. And `wake doctor --expect`'s option:
whatever text an operator gives is an expectation or one usage line, never a traceback."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgers.introspection import LastSettled
from ledgers.vocab import Status
from wake import config as wake_config
from wake.cli import doctor
from wake.cli.install import ExpectType
from wake.daemon import deadman

UTC = dt.UTC


def at(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


def _config(tmp_path: Path, tier: str) -> wake_config.Config:
    path = tmp_path / "wake.toml"
    path.write_text(f'[agents.demo]\ntimezone = "UTC"\n[agents.demo.tiers.surface]\nbinds = ["wake.surface"]\n{tier}\n')
    return wake_config.load_config_file(path, environ={})


def _ran(finished: dt.datetime | None, paused: dt.datetime | None = None) -> dict[tuple[str, str], LastSettled]:
    return {("demo", "surface"): LastSettled(agent_id="demo", tier="surface", wake_id=uuid.uuid4(), status=Status.completed,
                                             finished_at=finished, paused_at=paused)}


def _overdue(config: wake_config.Config, lasts: dict[tuple[str, str], LastSettled], now: dt.datetime,
             paused: set[tuple[str, str]] | None = None, first_seen: dict[tuple[str, str], dt.datetime] | None = None) -> list[deadman.Overdue]:
    return deadman.overdue(config, lasts, paused or set(), now, first_seen if first_seen is not None else {})


def test_two_slots_past_the_grace_make_a_tier_overdue_and_one_does_not(tmp_path: Path) -> None:
    config = _config(tmp_path, 'every = "1h"\njitter_s = 300\nmisfire_grace_s = 60')
    last = _ran(at(2026, 12, 1, 10, 0, 30))  # the 10:00 slot settled
    assert deadman.grace_s(config, "demo", "surface") == 360
    assert _overdue(config, last, at(2026, 12, 1, 12, 5)) == []  # 12:00 is due only at 12:06
    [late] = _overdue(config, last, at(2026, 12, 1, 12, 6))
    assert (late.agent_id, late.tier, late.since, late.due) == ("demo", "surface", at(2026, 12, 1, 10, 0, 30), 2)


def test_a_paused_tier_or_agent_is_not_overdue_and_a_pause_since_is_a_sign_of_life(tmp_path: Path) -> None:
    config = _config(tmp_path, 'every = "1h"')
    last, now = _ran(at(2026, 12, 1, 0, 0, 5)), at(2026, 12, 8, 0, 0, 1)  # a week of silence
    assert len(_overdue(config, last, now)) == 1
    assert _overdue(config, last, now, paused={("demo", "surface")}) == []
    assert _overdue(config, last, now, paused={("demo", "all")}) == []
    resumed = _ran(at(2026, 12, 1, 0, 0, 5), paused=at(2026, 12, 7, 23, 0, 0))  # held back by a pause until the 23:00 slot
    assert _overdue(config, resumed, now) == []  # only the 00:00 slot is due since


def test_slots_outside_active_hours_are_not_due_but_a_window_s_slots_that_never_ran_are(tmp_path: Path) -> None:
    config = _config(tmp_path, 'every = "1h"\nactive_hours = ["09:00-17:00"]')
    last = _ran(at(2026, 12, 1, 16, 0, 5))  # the last slot of Tuesday's window
    assert _overdue(config, last, at(2026, 12, 2, 8, 59)) == []  # the night's slots are not due
    assert _overdue(config, last, at(2026, 12, 2, 9, 30)) == []  # Wednesday 09:00: one
    assert len(_overdue(config, last, at(2026, 12, 2, 10, 0))) == 1  # 09:00 and 10:00
    assert len(_overdue(config, last, at(2026, 12, 2, 20, 0))) == 1  # the day's slots that never ran count after the window


def test_skipped_quiet_hours_are_not_due(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text('[agents.demo]\ntimezone = "UTC"\nquiet_hours = "22:00-08:00"\n'
                    '[agents.demo.tiers.surface]\nbinds = ["wake.surface"]\nevery = "1h"\nskip_quiet_hours = true\n')
    config = wake_config.load_config_file(path, environ={})
    last = _ran(at(2026, 12, 1, 21, 0, 5))
    assert _overdue(config, last, at(2026, 12, 2, 8, 30)) == []  # only 08:00 ran since
    assert len(_overdue(config, last, at(2026, 12, 2, 9, 0))) == 1


def test_a_tier_that_never_ran_counts_from_when_the_check_first_saw_it(tmp_path: Path) -> None:
    config = _config(tmp_path, 'every = "1h"')
    seen: dict[tuple[str, str], dt.datetime] = {}
    assert _overdue(config, {}, at(2026, 12, 1, 10, 30), first_seen=seen) == []
    assert seen == {("demo", "surface"): at(2026, 12, 1, 10, 30)}
    assert _overdue(config, {}, at(2026, 12, 1, 11, 59), first_seen=seen) == []
    [late] = _overdue(config, {}, at(2026, 12, 1, 12, 0), first_seen=seen)
    assert late.since is None


def test_a_dead_man_signature_is_the_same_for_every_instant() -> None:
    from wake.run import incident_policy

    a, text_a = incident_policy.deadman_signature(at(2026, 12, 1, 10, 0, 30))
    b, _ = incident_policy.deadman_signature(at(2027, 1, 2, 3, 4, 5, 678))
    assert a == b and a.startswith("missed: no settled row since") and "2026-12-01T10:00:30" in text_a


@pytest.mark.parametrize(("text", "agent", "tier", "within"), [("ops=2h", "ops", None, 7200), ("ops:whisper=30m", "ops", "whisper", 1800)])
def test_an_expectation_parses(text: str, agent: str, tier: str | None, within: int) -> None:
    e = doctor.Expectation.parse(text)
    assert (e.agent_id, e.tier, e.within_s) == (agent, tier, within)


@pytest.mark.parametrize("text", ["ops", "ops=", "ops=0s", "ops=2 hours", "=1h", "ops:deep=1h", "o p=1h", "ops=99999d"])
def test_a_malformed_expectation_is_one_usage_line(text: str) -> None:
    with pytest.raises(click.BadParameter) as caught:
        ExpectType().convert(text, None, None)
    assert "\n" not in caught.value.format_message()


@given(st.text(max_size=120))
def test_any_expect_text_is_an_expectation_or_one_usage_line(text: str) -> None:
    try:
        e = ExpectType().convert(text, None, None)
    except click.BadParameter as exc:
        assert "\n" not in exc.format_message() and len(exc.format_message()) < 400
    else:
        assert isinstance(e, doctor.Expectation) and 0 < e.within_s and len(e.agent_id) <= 64
