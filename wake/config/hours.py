"""Active hours (`agents.<id>.tiers.<tier>.active_hours`): when a tier's slots may run, as
windows of local time on days of the week (docs/daemon.md, "Active hours").

A window is `"[DAYS ]HH:MM-HH:MM"`: DAYS a comma list of day names or ranges (`mon-fri`,
`sat,sun`, `fri-mon`; omitted: every day), the times local to the agent's zone. A window whose
end is not after its start wraps midnight and belongs to the day it starts on (`fri 22:00-02:00`
is Friday night into Saturday); `24:00` ends a day. A tier with several windows is active in any
of them. Pure functions of the instant they are given.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WINDOW = re.compile(r"^\s*(?:(?P<days>[a-z,\- ]+?)\s+)?(?P<start>\d{1,2}:\d{2})\s*-\s*(?P<end>\d{1,2}:\d{2})\s*$", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class Window:
    """One window: the weekdays it starts on (0 = Monday), and minutes after local midnight."""

    days: frozenset[int]
    start_min: int
    end_min: int  # <= start_min: the window ends on the next day

    def contains(self, local: dt.datetime) -> bool:
        minute, day = local.hour * 60 + local.minute, local.weekday()
        if self.start_min < self.end_min:
            return day in self.days and self.start_min <= minute < self.end_min
        return (day in self.days and minute >= self.start_min) or ((day - 1) % 7 in self.days and minute < self.end_min)


def _minute(text: str, *, end: bool) -> int:
    hours, minutes = (int(p) for p in text.split(":"))
    if minutes > 59 or hours > 24 or (hours == 24 and (minutes or not end)):
        raise ValueError(f"{text!r} is not a time of day (00:00 to 23:59; 24:00 only as an end)")
    return hours * 60 + minutes


def _days(text: str | None) -> frozenset[int]:
    if text is None:
        return frozenset(range(7))
    days: set[int] = set()
    for item in (p.strip().lower() for p in text.split(",")):
        lo, sep, hi = (p.strip() for p in item.partition("-"))
        if lo not in DAYS or (sep and hi not in DAYS):
            raise ValueError(f"{item!r} is not a day or a range of days ({', '.join(DAYS)}; e.g. mon-fri)")
        first, last = DAYS.index(lo), DAYS.index(hi or lo)
        days.update((first + i) % 7 for i in range((last - first) % 7 + 1))
    return frozenset(days)


def parse_window(text: str) -> Window:
    """A window from its text; ValueError saying what is wrong."""
    match = _WINDOW.match(text)
    if not match:
        raise ValueError('expected "[DAYS ]HH:MM-HH:MM" such as "mon-fri 09:00-17:30" or "22:00-02:00"')
    start, end = _minute(match["start"], end=False), _minute(match["end"], end=True)
    if start == end:
        raise ValueError(f"the window {match['start']}-{match['end']} is empty (its start is its end)")
    return Window(days=_days(match["days"]), start_min=start, end_min=end)


@functools.lru_cache(maxsize=1024)
def parse(texts: tuple[str, ...]) -> tuple[Window, ...]:
    return tuple(parse_window(t) for t in texts)


def active(windows: Sequence[Window], timezone: str, at: dt.datetime) -> bool:
    """Whether `at` falls in one of `windows` (no windows: always)."""
    if not windows:
        return True
    local = at.astimezone(zoneinfo.ZoneInfo(timezone))
    return any(w.contains(local) for w in windows)


def describe(texts: Sequence[str]) -> str:
    return ", ".join(texts)
