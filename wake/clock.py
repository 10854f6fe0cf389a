"""The one clock. Every "now" in wake comes from here, timezone-aware, so tests can move it."""

from __future__ import annotations

import datetime as dt
import time


def now() -> dt.datetime:
    """The current time as an aware UTC datetime."""
    return dt.datetime.now(dt.UTC)


def monotonic_ms() -> float:
    return time.perf_counter() * 1000.0
