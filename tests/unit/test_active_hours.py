"""Active hours as pure functions of time (days, windows across midnight, the agent's zone, DST),
the config's refusals, and the next fire `wake status` shows as active."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from wake import config as wake_config
from wake.config import hours
from wake.daemon import control, remote
from wake.daemon import schedule as S
from wake.errors import ConfigError

UTC = dt.UTC
ZONE = "Europe/Stockholm"  # UTC+1 in winter, UTC+2 in summer


def at(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


def active(texts: tuple[str, ...], when: dt.datetime) -> bool:
    return hours.active(hours.parse(texts), ZONE, when)


def test_a_window_is_local_to_the_agent_and_limited_to_its_days() -> None:
    office = ("mon-fri 09:00-17:30",)
    assert active(office, at(2026, 12, 1, 8, 0))  # Tuesday 09:00 in Stockholm
    assert not active(office, at(2026, 12, 1, 7, 59))  # 08:59 local
    assert not active(office, at(2026, 12, 1, 16, 30))  # 17:30 local: the end is not in the window
    assert not active(office, at(2026, 12, 5, 10, 0))  # Saturday
    assert active(office, at(2026, 7, 1, 7, 0))  # summer time: 09:00 local is 07:00 UTC


def test_several_windows_and_one_that_wraps_midnight_belongs_to_its_starting_day() -> None:
    nights = ("fri 22:00-02:00", "sun 10:00-12:00")
    assert active(nights, at(2026, 12, 4, 21, 0))  # Friday 22:00 local
    assert active(nights, at(2026, 12, 5, 0, 59))  # Saturday 01:59 local: still Friday's window
    assert not active(nights, at(2026, 12, 5, 1, 0))  # Saturday 02:00 local
    assert not active(nights, at(2026, 12, 5, 21, 0))  # Saturday 22:00: the window starts on Fridays only
    assert active(nights, at(2026, 12, 6, 9, 30))  # Sunday 10:30 local
    assert not active(nights, at(2026, 12, 3, 23, 30))  # Friday 00:30 local: Thursday night was not named
    assert active(("00:00-24:00",), at(2026, 12, 6, 22, 59)) and active((), at(2026, 12, 6, 3, 0))  # all day; none: always


def test_day_ranges_wrap_the_week() -> None:
    assert hours.parse_window("fri-mon 10:00-11:00").days == frozenset({4, 5, 6, 0})
    assert hours.parse_window("Sat,sun 10:00-11:00").days == frozenset({5, 6})
    assert hours.parse_window("10:00-11:00").days == frozenset(range(7))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("9-5", 'expected "[DAYS ]HH:MM-HH:MM"'),
        ("mon-fry 09:00-10:00", "'mon-fry' is not a day or a range of days"),
        ("25:00-26:00", "'25:00' is not a time of day"),
        ("10:00-10:00", "is empty"),
        ("24:00-10:00", "24:00 only as an end"),
    ],
)
def test_a_bad_window_is_a_config_error_naming_the_key(write_config: Callable[..., Path], text: str, words: str) -> None:
    path = write_config(f'[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\nactive_hours = ["08:00-18:00", "{text}"]\n')
    with pytest.raises(ConfigError) as caught:
        wake_config.load_config_file(path, environ={})
    assert "agents.a.tiers.whisper.active_hours" in str(caught.value) and words in str(caught.value)


def test_the_next_active_fire_skips_the_slots_outside_the_windows(write_config: Callable[..., Path]) -> None:
    path = write_config(
        f'[agents.a]\ntimezone = "{ZONE}"\n[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\nevery = "1h"\nactive_hours = ["mon-fri 09:00-17:00"]\n'
        '[agents.a.tiers.surface]\nbinds = ["wake.surface"]\nevery = "1h"\n'
    )
    config = wake_config.load_config_file(path, environ={})
    sched = S.from_config(config, "a", "whisper")
    assert S.next_fire(sched, at(2026, 12, 4, 16, 30)) == at(2026, 12, 4, 17, 0)  # Friday 18:00 local: fires, and is skipped
    assert S.next_active_fire(sched, at(2026, 12, 4, 16, 30)) == at(2026, 12, 7, 8, 0)  # Monday 09:00 local
    replica = control.ReplicaState(
        replica_id="r", host="h", pid=1, version="v", started_at=at(2026, 12, 4), heartbeat_at=at(2026, 12, 4),
        next_fires=[{"agent": "a", "tier": "whisper", "at": at(2026, 12, 4, 17).isoformat()},
                    {"agent": "a", "tier": "surface", "at": at(2026, 12, 4, 17).isoformat()}],
    )
    fires = {f["tier"]: f for f in remote._next_fires(config, [replica])}
    assert fires["whisper"]["next_active"] == at(2026, 12, 7, 8).isoformat()
    assert fires["surface"]["next_active"] == fires["surface"]["at"]  # no active hours: every fire runs
