"""The one clock. Every "now" in wake comes from here, timezone-aware, so tests can move it; and the
one way the arrival writes a time (`stamp`, `day`): `2026-12-01 09:15` in the agent's zone, which
the clock block names."""

from __future__ import annotations

import datetime as dt
import time
import zoneinfo

STAMP = "%Y-%m-%d %H:%M"
DAY = "%Y-%m-%d"


def now() -> dt.datetime:
    """The current time as an aware UTC datetime."""
    return dt.datetime.now(dt.UTC)


def monotonic_ms() -> float:
    return time.perf_counter() * 1000.0


def stamp(at: dt.datetime, zone: str | zoneinfo.ZoneInfo) -> str:
    """`YYYY-MM-DD HH:MM` in `zone`: every time of day in the arrival."""
    return f"{at.astimezone(zone if isinstance(zone, zoneinfo.ZoneInfo) else zoneinfo.ZoneInfo(zone)):{STAMP}}"


def day(at: dt.datetime, zone: str | zoneinfo.ZoneInfo) -> str:
    """`YYYY-MM-DD` in `zone`: every date in the arrival."""
    return f"{at.astimezone(zone if isinstance(zone, zoneinfo.ZoneInfo) else zoneinfo.ZoneInfo(zone)):{DAY}}"
