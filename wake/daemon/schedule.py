"""Step 1 of a wake: when each (agent, tier) fires, as pure functions of time, and the APScheduler
trigger built on them.

A *slot* is the unjittered instant a schedule names. It is the key every replica claims
(`wake_slots`), so it must be the same on every replica whatever its clock or start time:

- `every = "15m"` slots are multiples of the interval counted from the Unix epoch (UTC), never
  "start time + interval";
- `cron = "..."` slots come from APScheduler's CronTrigger in the agent's IANA timezone;
- jitter delays the *execution* of a slot by a deterministic amount (a hash of agent, tier and
  slot: every replica waits the same), it never moves the slot. The trigger itself fires at
  slot + delay and remembers which slot each fire time belongs to (`SlotTrigger.take`), so the
  fires of a thousand agents spread over the jitter window instead of falling on one instant,
  and no job recomputes its slot. APScheduler's own `jitter` is not used: it shifts the fire
  time at random and the slot would be lost with it.

Quiet hours (`agents.X.quiet_hours = "23:00-07:00"`, local, may wrap midnight) drop slots when
the tier skips them: whisper and surface by default, full not; `skip_quiet_hours` overrides.

Active hours (`active_hours` on a tier, `wake.config.hours`) do not drop slots: a slot outside
them fires, is claimed, and gets its `skipped` row (`wake.run.claim`); `next_active_fire` is the
next one that will run.

Time is always an argument: `slot_at_or_before`, `slot_after`, `next_fire`, `next_active_fire`, `fires_between`,
`last_missed` and `in_quiet_hours` take the instants they reason about.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger

from ledgers.vocab import Tier
from wake.config import Config, hours, parse_duration_s

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# Tiers that skip quiet hours unless `skip_quiet_hours` says otherwise.
QUIET_BY_DEFAULT: frozenset[str] = frozenset({Tier.whisper, Tier.surface})
# Tiers that run one catch-up wake for missed slots at start unless `catch_up` says otherwise.
CATCH_UP_BY_DEFAULT: frozenset[str] = frozenset({Tier.surface, Tier.full})
# A schedule whose every slot falls in quiet hours has no next fire; stop looking after this many.
_MAX_QUIET_STEPS = 100_000
# How far back a cron schedule is searched for its previous slot (yearly crons still resolve).
_CRON_LOOKBACK = (dt.timedelta(minutes=5), dt.timedelta(hours=1), dt.timedelta(days=2), dt.timedelta(days=32), dt.timedelta(days=400))


@dataclass(frozen=True, kw_only=True)
class QuietHours:
    start_min: int  # minutes after local midnight
    end_min: int

    @classmethod
    def parse(cls, text: str) -> QuietHours:
        start, end = text.split("-")
        return cls(start_min=_minutes(start), end_min=_minutes(end))

    def contains(self, local: dt.datetime) -> bool:
        minute = local.hour * 60 + local.minute
        if self.start_min <= self.end_min:
            return self.start_min <= minute < self.end_min
        return minute >= self.start_min or minute < self.end_min  # wraps midnight


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """One (agent, tier)'s schedule, resolved from the config."""

    agent_id: str
    tier: str
    timezone: str
    every_s: int | None = None
    cron: str | None = None
    jitter_s: int = 0
    quiet: QuietHours | None = None
    skip_quiet: bool = False
    catch_up: str = "skip"
    active: tuple[hours.Window, ...] = ()  # the tier's active hours: its slots outside them are claimed and skipped

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone)

    def describe(self) -> str:
        what = f"every {self.every_s}s" if self.every_s else f"cron {self.cron!r} {self.timezone}"
        return what + (" (skips quiet hours)" if self.skip_quiet and self.quiet else "")




_CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")


@functools.lru_cache(maxsize=4096)
def crontab_trigger(expr: str, zone: zoneinfo.ZoneInfo) -> CronTrigger:
    """APScheduler's CronTrigger for a 5-field crontab, with cron(5)'s day-of-week numbers.

    APScheduler 3 counts numeric days from Monday = 0, crontab from Sunday = 0 (7 too): `1` must
    mean Monday. Numbers and number ranges are turned into day names, which mean the same to both.
    """
    fields = expr.split()
    if len(fields) == 5:
        items = []
        for item in fields[4].split(","):
            lo, sep, hi = item.partition("-")
            if lo.isdigit() and (not sep or hi.isdigit()) and int(lo) <= 7 and int(hi or lo) <= 7:
                items += [_CRON_DAYS[d] for d in range(int(lo), int(hi or lo) + 1)]
            else:
                items.append(item)
        fields[4] = ",".join(dict.fromkeys(items))
    return CronTrigger.from_crontab(" ".join(fields), timezone=zone)


def from_config(config: Config, agent_id: str, tier: str) -> Schedule:
    agent = config.agents[agent_id]
    conf = config.tier(agent_id, tier)
    spec = config.schedule_of(agent_id, tier)
    skip_quiet = conf.skip_quiet_hours if conf.skip_quiet_hours is not None else tier in QUIET_BY_DEFAULT
    catch_up = conf.catch_up or ("one" if tier in CATCH_UP_BY_DEFAULT else "skip")
    return Schedule(
        agent_id=agent_id, tier=tier, timezone=agent.timezone,
        every_s=parse_duration_s(spec["every"]) if "every" in spec else None, cron=spec.get("cron"),
        jitter_s=conf.jitter_s, quiet=QuietHours.parse(agent.quiet_hours) if agent.quiet_hours else None,
        skip_quiet=skip_quiet, catch_up=catch_up, active=hours.parse(conf.active_hours),
    )


def all_schedules(config: Config) -> list[Schedule]:
    return [from_config(config, a, t) for a, agent in config.agents.items() for t in agent.tiers]


# -- raw slots (quiet hours ignored) -------------------------------------------------------------


def slot_after(s: Schedule, t: dt.datetime) -> dt.datetime:
    """The first slot strictly after `t`."""
    if s.every_s:
        n = int((t - EPOCH) // dt.timedelta(seconds=s.every_s)) + 1
        return EPOCH + dt.timedelta(seconds=n * s.every_s)
    assert s.cron is not None
    found = _cron_slot_after(s.cron, s.timezone, t.astimezone(dt.UTC))
    if found is None:
        raise ValueError(f"cron {s.cron!r} has no slot after {t.isoformat()}")
    return found


@functools.lru_cache(maxsize=65_536)
def _cron_slot_after(expr: str, timezone: str, after: dt.datetime) -> dt.datetime | None:
    """The first slot of a cron strictly after `after` (UTC), memoized per expression, zone and
    instant: a CronTrigger step costs ~20x an `every` step, and a thousand agents on the same cron
    ask the same question at the same instants."""
    zone = zoneinfo.ZoneInfo(timezone)
    trigger = crontab_trigger(expr, zone)
    # CronTrigger returns the first fire at or after `now`, rounded up to a whole second. Step in
    # UTC, then convert: local wall-clock arithmetic would lose the fold of a repeated hour.
    while True:
        nxt: dt.datetime | None = trigger.get_next_fire_time(None, (after + dt.timedelta(microseconds=1)).astimezone(zone))
        if nxt is None or nxt.astimezone(dt.UTC) <= after:
            return None
        after = nxt.astimezone(dt.UTC)
        # A cron names local wall times: in the hour repeated when clocks go back, each wall time
        # runs once (its first occurrence), like cron(8). A wall time skipped when clocks go
        # forward runs at the same wall time one hour later (APScheduler's choice).
        if not after.astimezone(zone).fold:
            return after


def slot_at_or_before(s: Schedule, t: dt.datetime) -> dt.datetime | None:
    """The newest slot at or before `t` (None for a cron that never fired within ~400 days)."""
    if s.every_s:
        n = int((t - EPOCH) // dt.timedelta(seconds=s.every_s))
        return EPOCH + dt.timedelta(seconds=n * s.every_s)
    for back in _CRON_LOOKBACK:
        found = None
        candidate = slot_after(s, t - back)
        while candidate <= t:
            found = candidate
            candidate = slot_after(s, candidate)
        if found is not None:
            return found
    return None


# -- fires (quiet hours applied) -----------------------------------------------------------------


def in_quiet_hours(quiet: QuietHours | None, timezone: str, t: dt.datetime) -> bool:
    return quiet is not None and quiet.contains(t.astimezone(zoneinfo.ZoneInfo(timezone)))


def skipped_for_quiet(s: Schedule, slot: dt.datetime) -> bool:
    return s.skip_quiet and in_quiet_hours(s.quiet, s.timezone, slot)


def next_fire(s: Schedule, after: dt.datetime) -> dt.datetime | None:
    """The first slot strictly after `after` that this tier runs (quiet hours applied)."""
    slot = slot_after(s, after)
    for _ in range(_MAX_QUIET_STEPS):
        if not skipped_for_quiet(s, slot):
            return slot
        slot = slot_after(s, slot)
    return None


def next_active_fire(s: Schedule, after: dt.datetime) -> dt.datetime | None:
    """The first fire strictly after `after` that falls in the tier's active hours: the next wake
    that will run rather than be recorded `skipped` (inactive_hours). None when none comes within
    the search bound (a window no slot ever meets)."""
    slot = next_fire(s, after)
    for _ in range(_MAX_QUIET_STEPS):
        if slot is None or hours.active(s.active, s.timezone, slot):
            return slot
        slot = next_fire(s, slot)
    return None


def fires_between(s: Schedule, start: dt.datetime, end: dt.datetime) -> Iterator[dt.datetime]:
    """Every slot this tier runs in (start, end]."""
    slot = next_fire(s, start)
    while slot is not None and slot <= end:
        yield slot
        slot = next_fire(s, slot)


def fire_at_or_before(s: Schedule, t: dt.datetime, *, after: dt.datetime | None = None) -> dt.datetime | None:
    """The newest slot this tier runs at or before `t` (and strictly after `after`), or None."""
    slot = slot_at_or_before(s, t)
    for _ in range(_MAX_QUIET_STEPS):
        if slot is None or (after is not None and slot <= after):
            return None
        if not skipped_for_quiet(s, slot):
            return slot
        slot = slot_at_or_before(s, slot - dt.timedelta(microseconds=1))
    return None


def last_missed(s: Schedule, last_claimed: dt.datetime | None, now: dt.datetime) -> dt.datetime | None:
    """The newest slot this tier runs in (last_claimed, now], or None. A schedule that never ran
    has missed nothing: the first start does not invent history."""
    if last_claimed is None:
        return None
    return fire_at_or_before(s, now, after=last_claimed)


def jitter_delay_s(s: Schedule, slot: dt.datetime) -> float:
    """How long to wait before running `slot`: in [0, jitter_s), the same on every replica."""
    if s.jitter_s <= 0:
        return 0.0
    digest = hashlib.sha256(f"{s.agent_id}/{s.tier}/{slot.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * s.jitter_s


# How many fire times a trigger remembers the slot of (the fire handed over, and the next one).
_REMEMBERED_FIRES = 4


class SlotTrigger(BaseTrigger):  # type: ignore[misc]  # APScheduler 3 ships no types: BaseTrigger is Any
    """An APScheduler trigger that fires at this tier's slots (quiet hours applied), each delayed
    by its deterministic jitter, and carries the slot of each fire.

    APScheduler asks for the next fire time right after it hands a fire to the job (and the job's
    coroutine runs later, in its own task): that call names the fire just handed over, and `take`
    gives the job its slot and delay. With `coalesce`, only the newest of several due fires runs,
    and it is the one remembered."""

    __slots__ = ("schedule", "since", "_slots", "_fired")

    def __init__(self, schedule: Schedule, *, since: dt.datetime | None = None) -> None:
        self.schedule = schedule
        self.since = since  # a job added later than its agent was gained starts from the gain (`wake.daemon.jobs`)
        self._slots: dict[dt.datetime, tuple[dt.datetime, float]] = {}
        self._fired: tuple[dt.datetime, float] | None = None

    def take(self) -> tuple[dt.datetime, float] | None:
        """The (slot, jitter delay) of the fire handed over last, once; None if there is none."""
        fired, self._fired = self._fired, None
        return fired

    def get_next_fire_time(self, previous_fire_time: dt.datetime | None, now: dt.datetime) -> dt.datetime | None:
        # APScheduler's contract: after a fire, the next one strictly after it (even if already
        # past: the scheduler collects those as missed and coalesces them); first, the first slot
        # at or after `now` (or `since`, if earlier: that fire may be past, and runs at once).
        s = self.schedule
        if previous_fire_time is None:
            start = now if self.since is None else min(now, self.since)
            slot = next_fire(s, start - dt.timedelta(microseconds=1))
        else:
            known = self._slots.get(previous_fire_time) or self._recover(previous_fire_time)
            if previous_fire_time <= now:
                self._fired = known
            slot = next_fire(s, known[0] if known else previous_fire_time)
        for _ in range(_MAX_QUIET_STEPS):
            if slot is None:
                return None
            delay = jitter_delay_s(s, slot)
            fire = slot + dt.timedelta(seconds=delay)
            if previous_fire_time is None or fire > previous_fire_time:  # a jitter longer than the interval could reorder fires
                self._remember(fire, slot, delay)
                return fire
            slot = next_fire(s, slot)
        return None

    def _recover(self, fire: dt.datetime) -> tuple[dt.datetime, float] | None:
        """The slot of a fire time no longer remembered (many fires missed at once): the newest slot
        at or before it (with a jitter shorter than the interval, the one it belongs to)."""
        slot = fire_at_or_before(self.schedule, fire)
        return (slot, jitter_delay_s(self.schedule, slot)) if slot is not None else None

    def _remember(self, fire: dt.datetime, slot: dt.datetime, delay: float) -> None:
        self._slots[fire] = (slot, delay)
        while len(self._slots) > _REMEMBERED_FIRES:
            del self._slots[next(iter(self._slots))]

    def __str__(self) -> str:
        return f"slots[{self.schedule.describe()}]"

    def __repr__(self) -> str:
        return f"<SlotTrigger {self.schedule.agent_id}/{self.schedule.tier} {self.schedule.describe()}>"
