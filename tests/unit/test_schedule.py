"""Schedules as pure functions of time, against fixed datetimes (DST included)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from wake import config as wake_config
from wake.daemon import schedule as S

UTC = dt.UTC


def at(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


def every(seconds: int, **kw: object) -> S.Schedule:
    return S.Schedule(**{"agent_id": "a", "tier": "whisper", "timezone": "Europe/Stockholm", "every_s": seconds, **kw})  # type: ignore[arg-type]


def cron(expr: str, **kw: object) -> S.Schedule:
    return S.Schedule(agent_id="a", tier="full", timezone="Europe/Stockholm", cron=expr, **kw)  # type: ignore[arg-type]


QUIET = S.QuietHours.parse("23:00-07:00")


def test_interval_slots_are_anchored_to_the_epoch_not_to_the_start() -> None:
    s = every(900)
    assert S.slot_after(s, at(2026, 11, 29, 12, 7, 13)) == at(2026, 11, 29, 12, 15)
    assert S.slot_after(s, at(2026, 11, 29, 12, 15)) == at(2026, 11, 29, 12, 30)  # strictly after
    assert S.slot_at_or_before(s, at(2026, 11, 29, 12, 15)) == at(2026, 11, 29, 12, 15)
    assert S.slot_at_or_before(s, at(2026, 11, 29, 12, 29, 59, 999999)) == at(2026, 11, 29, 12, 15)
    # two replicas started at different instants compute the same slots
    a = list(S.fires_between(s, at(2026, 11, 29, 12, 1, 2), at(2026, 11, 29, 13, 0)))
    b = list(S.fires_between(s, at(2026, 11, 29, 12, 14, 59), at(2026, 11, 29, 13, 0)))
    assert a == b == [at(2026, 11, 29, 12, 15), at(2026, 11, 29, 12, 30), at(2026, 11, 29, 12, 45), at(2026, 11, 29, 13, 0)]


def test_a_late_or_early_clock_names_the_same_slot() -> None:
    s = every(1)
    slot = at(2026, 11, 29, 12, 0, 5)
    # a replica fires when its own clock reads the slot; its "now" is that slot plus loop lag
    for lag in (dt.timedelta(0), dt.timedelta(milliseconds=1), dt.timedelta(milliseconds=900)):
        assert S.fire_at_or_before(s, slot + lag) == slot


def test_cron_follows_the_agents_zone_across_both_dst_changes() -> None:
    s = cron("30 3 * * *")
    spring = list(S.fires_between(s, at(2026, 3, 27), at(2026, 3, 31)))
    assert spring == [at(2026, 3, 27, 2, 30), at(2026, 3, 28, 2, 30), at(2026, 3, 29, 1, 30), at(2026, 3, 30, 1, 30)]
    autumn = list(S.fires_between(s, at(2026, 10, 24), at(2026, 10, 27)))
    assert autumn == [at(2026, 10, 24, 1, 30), at(2026, 10, 25, 2, 30), at(2026, 10, 26, 2, 30)]
    assert all(x.astimezone(s.zone).strftime("%H:%M") == "03:30" for x in spring + autumn)


def test_cron_in_the_repeated_hour_runs_once_and_in_the_skipped_hour_runs_an_hour_later() -> None:
    s = cron("30 2 * * *")
    assert list(S.fires_between(s, at(2026, 10, 24, 12), at(2026, 10, 26, 12))) == [at(2026, 10, 25, 0, 30), at(2026, 10, 26, 1, 30)]
    assert S.slot_at_or_before(s, at(2026, 10, 25, 1, 45)) == at(2026, 10, 25, 0, 30)
    # 02:30 does not exist on 29 March 2026 in Stockholm: it runs at 03:30 CEST
    assert list(S.fires_between(s, at(2026, 3, 28, 12), at(2026, 3, 29, 12))) == [at(2026, 3, 29, 1, 30)]


def test_previous_cron_slot_is_found_far_back() -> None:
    weekly = cron("0 9 * * 1")  # Mondays 09:00 local
    assert S.slot_at_or_before(weekly, at(2026, 11, 29, 12)) == at(2026, 11, 23, 8)
    yearly = cron("0 0 1 1 *")
    assert S.slot_at_or_before(yearly, at(2026, 11, 29)) == at(2025, 12, 31, 23)


@pytest.mark.parametrize(
    ("when", "quiet"),
    [
        (at(2026, 1, 15, 21, 59), False),  # 22:59 CET
        (at(2026, 1, 15, 22, 0), True),  # 23:00 CET
        (at(2026, 1, 16, 5, 59), True),  # 06:59 CET
        (at(2026, 1, 16, 6, 0), False),  # 07:00 CET
        (at(2026, 7, 15, 5, 30), False),  # 07:30 CEST (06:30 CET would be quiet)
        (at(2026, 7, 15, 4, 59), True),  # 06:59 CEST
        (at(2026, 7, 15, 21, 0), True),  # 23:00 CEST
    ],
)
def test_quiet_hours_wrap_midnight_in_the_agents_zone(when: dt.datetime, quiet: bool) -> None:
    assert S.in_quiet_hours(QUIET, "Europe/Stockholm", when) is quiet


def test_quiet_hours_within_a_day() -> None:
    lunch = S.QuietHours.parse("12:00-13:30")
    assert S.in_quiet_hours(lunch, "UTC", at(2026, 1, 1, 13, 29)) and not S.in_quiet_hours(lunch, "UTC", at(2026, 1, 1, 13, 30))
    assert not S.in_quiet_hours(None, "UTC", at(2026, 1, 1, 12, 30))


def test_skipping_tiers_jump_over_quiet_hours_and_others_do_not() -> None:
    whisper = every(900, quiet=QUIET, skip_quiet=True)
    evening = at(2026, 1, 15, 21, 50)  # 22:50 CET
    assert S.next_fire(whisper, evening) == at(2026, 1, 16, 6, 0)  # 07:00 CET
    assert S.fire_at_or_before(whisper, at(2026, 1, 16, 3, 0)) == at(2026, 1, 15, 21, 45)
    loud = dataclasses.replace(whisper, skip_quiet=False)
    assert S.next_fire(loud, evening) == at(2026, 1, 15, 22, 0)
    always_quiet = every(900, quiet=S.QuietHours.parse("00:00-00:00"), skip_quiet=True)
    assert not S.in_quiet_hours(always_quiet.quiet, "UTC", evening)  # an empty window is never quiet


def test_last_missed_after_a_three_hour_gap() -> None:
    surface = every(3600, tier="surface")
    now = at(2026, 11, 29, 12, 20)
    assert S.last_missed(surface, at(2026, 11, 29, 9, 0), now) == at(2026, 11, 29, 12, 0)
    assert S.last_missed(surface, at(2026, 11, 29, 12, 0), now) is None  # nothing missed
    assert S.last_missed(surface, None, now) is None  # never ran: no invented history
    full = cron("30 3 * * *")
    assert S.last_missed(full, at(2026, 11, 27, 2, 30), now) == at(2026, 11, 29, 2, 30)
    night = every(3600, quiet=QUIET, skip_quiet=True)
    # everything missed was in quiet hours: the newest missed slot it runs is the last one before
    assert S.last_missed(night, at(2026, 1, 15, 20, 0), at(2026, 1, 16, 3, 0)) == at(2026, 1, 15, 21, 0)
    assert S.last_missed(night, at(2026, 1, 15, 21, 0), at(2026, 1, 16, 3, 0)) is None


def test_jitter_delays_execution_the_same_everywhere_and_never_moves_the_slot() -> None:
    s = every(60, jitter_s=20)
    slots = [at(2026, 11, 29, 12, m) for m in range(30)]
    delays = [S.jitter_delay_s(s, x) for x in slots]
    assert all(0 <= d < 20 for d in delays) and len(set(delays)) > 20
    assert delays == [S.jitter_delay_s(dataclasses.replace(s), x) for x in slots]  # deterministic
    assert S.jitter_delay_s(every(60), slots[0]) == 0
    # the slot is named at fire time, before the delay: the jittered instant still maps to it
    assert all(S.fire_at_or_before(s, x + dt.timedelta(seconds=d)) == x for x, d in zip(slots, delays, strict=True))


def test_slot_trigger_fires_exactly_at_slots_and_never_repeats_one() -> None:
    s = every(900, quiet=QUIET, skip_quiet=True)
    trigger = S.SlotTrigger(s)
    now = at(2026, 1, 15, 21, 7, 30)
    first = trigger.get_next_fire_time(None, now)
    assert first == at(2026, 1, 15, 21, 15)
    assert trigger.get_next_fire_time(None, at(2026, 1, 15, 21, 15)) == at(2026, 1, 15, 21, 15)  # a slot at "now" fires
    assert trigger.get_next_fire_time(first, at(2026, 1, 15, 21, 15, 0, 500)) == at(2026, 1, 15, 21, 30)
    assert trigger.get_next_fire_time(at(2026, 1, 15, 21, 45), now) == at(2026, 1, 16, 6, 0)  # over quiet hours


def test_schedules_from_config_use_the_tier_defaults(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(
        '[agents.a]\ntimezone = "America/New_York"\nquiet_hours = "22:00-06:30"\n'
        '[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\n'
        '[agents.a.tiers.surface]\nbinds = ["wake.surface"]\nskip_quiet_hours = false\ncatch_up = "skip"\njitter_s = 30\n'
        '[agents.a.tiers.full]\nbinds = ["wake"]\n'
    )
    config = wake_config.load_config_file(path, environ={})
    got = {s.tier: s for s in S.all_schedules(config)}
    assert (got["whisper"].every_s, got["whisper"].skip_quiet, got["whisper"].catch_up) == (900, True, "skip")
    assert (got["surface"].every_s, got["surface"].skip_quiet, got["surface"].catch_up, got["surface"].jitter_s) == (3600, False, "skip", 30)
    assert (got["full"].cron, got["full"].skip_quiet, got["full"].catch_up) == ("30 3 * * *", False, "one")
    assert got["full"].quiet == S.QuietHours(start_min=22 * 60, end_min=6 * 60 + 30)
    assert S.next_fire(got["full"], at(2026, 11, 29, 12)) == at(2026, 11, 30, 8, 30)  # 03:30 EST


@pytest.mark.parametrize(
    ("dow", "weekdays"),
    [("1", {0}), ("0", {6}), ("7", {6}), ("1-5", {0, 1, 2, 3, 4}), ("0,6", {5, 6}), ("mon,fri", {0, 4}), ("*", set(range(7)))],
)
def test_crontab_day_numbers_mean_what_cron_means(dow: str, weekdays: set[int]) -> None:
    s = cron(f"0 9 * * {dow}")
    got = {x.astimezone(s.zone).weekday() for x in S.fires_between(s, at(2026, 11, 1), at(2026, 11, 15))}
    assert got == weekdays


def test_slot_trigger_fires_at_slot_plus_jitter_and_hands_the_job_its_slot() -> None:
    s = every(60, jitter_s=20)
    trigger = S.SlotTrigger(s)
    now = at(2026, 11, 29, 12, 0, 30)
    fire = trigger.get_next_fire_time(None, now)
    slot = at(2026, 11, 29, 12, 1)
    delay = S.jitter_delay_s(s, slot)
    assert 0 < delay < 20 and fire == slot + dt.timedelta(seconds=delay)
    assert trigger.take() is None  # nothing has fired yet
    # APScheduler hands the fire over, then asks for the next one: that names the fire's slot
    later = fire + dt.timedelta(milliseconds=3)
    nxt = trigger.get_next_fire_time(fire, later)
    assert trigger.take() == (slot, delay)
    assert trigger.take() is None  # once
    following = at(2026, 11, 29, 12, 2)
    assert nxt == following + dt.timedelta(seconds=S.jitter_delay_s(s, following))
    # many fires missed at once (the remembered ones are gone): the slot is recovered from the time
    far = at(2026, 11, 29, 18, 0)
    fresh = S.SlotTrigger(s)
    missed = far + dt.timedelta(seconds=S.jitter_delay_s(s, far))
    fresh.get_next_fire_time(missed, missed + dt.timedelta(seconds=1))
    assert fresh.take() == (far, S.jitter_delay_s(s, far))


def test_a_slot_trigger_added_after_its_gain_starts_from_the_gain() -> None:
    """A job added seconds after its agent was gained (`wake.daemon.jobs.add_gradually`) still
    fires the slot that fell due in between, at once; without `since` that slot would be skipped."""
    s = every(60, jitter_s=20)
    slot = at(2026, 11, 29, 12, 1)
    gained = slot - dt.timedelta(seconds=2)
    added = slot + dt.timedelta(seconds=25)  # past the slot's fire (its jitter is under 20 s)
    fire = slot + dt.timedelta(seconds=S.jitter_delay_s(s, slot))
    assert S.SlotTrigger(s, since=gained).get_next_fire_time(None, added) == fire < added
    assert S.SlotTrigger(s).get_next_fire_time(None, added) > added  # the old start: the next slot only
    assert S.SlotTrigger(s, since=added + dt.timedelta(hours=1)).get_next_fire_time(None, added) == S.SlotTrigger(s).get_next_fire_time(None, added)


def test_agents_on_one_cron_share_its_slots() -> None:
    a = S.Schedule(agent_id="a", tier="full", timezone="Europe/Berlin", cron="*/2 * * * *")
    b = dataclasses.replace(a, agent_id="b")
    t = at(2026, 3, 29, 0, 59, 30)
    assert S.slot_after(a, t) == S.slot_after(b, t) == at(2026, 3, 29, 1, 0)
    hits = S._cron_slot_after.cache_info().hits
    S.slot_after(b, t)
    assert S._cron_slot_after.cache_info().hits == hits + 1  # memoized per expression, zone and instant
