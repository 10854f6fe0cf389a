"""The value checks the config's models share: durations, addresses, agent ids, URLs, bounds.

Every check raises ValueError with one line saying what was expected, and every value it echoes is
clipped (`clip`), so a 100 MB string in a config file is a short line on stderr, not 100 MB.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

# An echoed value is cut to this many characters, with its full length said.
CLIP_CHARS = 60

# An agent id names its memory repository, its lock and its keys: letters, digits, `_` and `-`,
# 1 to 64 of them. Nothing else (no `/`, no `.`, no empty id) can reach a path.
AGENT_ID_PATTERN = r"[A-Za-z0-9_-]{1,64}"
_AGENT_ID = re.compile(AGENT_ID_PATTERN)

# The longest duration any key may hold: ten years. Schedules, waits, TTLs and timeouts beyond it
# mean nothing, and datetime arithmetic past it overflows (`timedelta`, year 9999).
MAX_DURATION_S = 10 * 365 * 86400
# A key's unit, by the suffix of its name (units are in the names): seconds per unit.
_UNIT_SUFFIXES_S: tuple[tuple[str, float], ...] = (("_ms", 0.001), ("_s", 1), ("_h", 3600), ("_days", 86400))

# The largest count or size any key may hold without a bound of its own (pool sizes and concurrency
# have tighter ones): past it a value is a typo, and a pool or a buffer that size takes the host.
MAX_COUNT = 1_000_000_000
MAX_POOL_SIZE = 1000  # postgres.pool_min_size, pool_max_size: connections per replica
MAX_CONCURRENT_WAKES = 10_000  # daemon.max_concurrent_wakes

# The schemes each store's client takes; anything else is one line at load, not the driver's ValueError.
POSTGRES_SCHEMES = ("postgresql", "postgres")
REDIS_SCHEMES = ("redis", "rediss", "unix")
NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")

_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_DURATION_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def clip(value: object) -> str:
    """`repr(value)` cut to CLIP_CHARS, saying the full length when it was cut."""
    text = repr(value)
    if len(text) <= CLIP_CHARS:
        return text
    length = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters as written"
    return f"{text[:CLIP_CHARS]}... ({length})"


def unstorable(text: str, *, single_line: bool = False) -> str | None:
    """Why `text` may not be stored or used as given, or None: a NUL (PostgreSQL's text cannot hold
    one), a lone surrogate (not UTF-8: no driver can send it), or, with `single_line` (a name, an
    author, a key), any control character. Every inbound request checks its fields with it, so such
    input is a 4xx with this reason rather than a driver's error."""
    for ch in text:
        cp = ord(ch)
        if cp == 0:
            return "contains a NUL character (\\u0000)"
        if 0xD800 <= cp <= 0xDFFF:
            return f"contains a lone surrogate (\\u{cp:04x}), which is not UTF-8"
        if single_line and (cp < 0x20 or 0x7F <= cp < 0xA0):
            return f"contains a control character (\\u{cp:04x})"
    return None


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """`1 tool call`, `2 tool calls`, `0 turns`: a count with its noun agreeing."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def parse_duration_s(text: str) -> int:
    """`"15m"` -> 900. Units: s, m, h, d; at most MAX_DURATION_S."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f'expected a duration like "30s", "15m", "1h" or "1d", got {clip(text)}')
    digits = match.group(1).lstrip("0") or "0"
    seconds = int(digits) * _DURATION_UNITS_S[match.group(2)] if len(digits) <= 12 else MAX_DURATION_S + 1
    if seconds <= 0:
        raise ValueError(f"expected a positive duration, got {clip(text)}")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"expected a duration of at most {MAX_DURATION_S // 86400}d, got {clip(text)}")
    return seconds


def duration_value(value: Any) -> Any:
    """A duration key written either way the config writes durations: a number of seconds (`604800`)
    or a duration string (`"7d"`, `"12h"`); a string becomes its seconds, any other value is left
    for the field's own type check. Raises ValueError (one line) for a string that is no duration,
    or a number of seconds that is not positive or more than MAX_DURATION_S."""
    if isinstance(value, str):
        return parse_duration_s(value)
    if isinstance(value, bool):
        raise ValueError(f'expected a number of seconds or a duration like "12h" or "7d", got {clip(value)}')
    if isinstance(value, int | float):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f'expected a positive number of seconds or a duration like "12h" or "7d", got {clip(value)}')
        if value > MAX_DURATION_S:
            raise ValueError(f"expected a duration of at most {MAX_DURATION_S // 86400}d, got {clip(value)}")
    return value


def check_agent_id(agent_id: str) -> str:
    """The agent id itself, or ValueError saying the pattern."""
    if not _AGENT_ID.fullmatch(agent_id):
        raise ValueError(f"expected an agent id of 1 to 64 letters, digits, _ or - ({AGENT_ID_PATTERN}), got {clip(agent_id)}")
    return agent_id


_HTTP_URL: pydantic.TypeAdapter[pydantic.HttpUrl] = pydantic.TypeAdapter(pydantic.HttpUrl)


def check_http_url(value: str) -> str:
    """An http:// or https:// URL with a host and no whitespace, kept as written."""
    expected = f"expected an http:// or https:// URL with a host, got {clip(value)}"
    if not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
        raise ValueError(expected)
    try:
        _HTTP_URL.validate_python(value)
    except pydantic.ValidationError:
        raise ValueError(expected) from None
    return value


def check_scheme(value: str, schemes: tuple[str, ...], what: str) -> str:
    """`value` itself when it is a URL of one of `schemes` with no whitespace, else ValueError."""
    scheme, sep, _ = value.partition("://")
    if not sep or scheme.lower() not in schemes or any(c.isspace() for c in value) or unstorable(value, single_line=True):
        raise ValueError(f"expected {what} ({', '.join(s + '://' for s in schemes)}), got {clip(value)}")
    return value


def parse_listen(text: str) -> tuple[str, int]:
    """`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464` -> (host, port). Port 0 picks a free one.

    Raises ValueError with one line saying what was expected (a config validator can pass it on)."""
    expected = f"expected HOST:PORT such as 127.0.0.1:9464 or [::1]:9464, got {clip(text)}"
    value = text.strip()
    if value.startswith("["):
        host, sep, port_text = value[1:].partition("]:")
        if not sep:
            raise ValueError(expected)
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{expected}: {clip(host)} is not an IPv6 address") from None
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep or not host or ":" in host:
            raise ValueError(expected + ("" if ":" not in host else " (write an IPv6 address in brackets)"))
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{expected}: the port must be a number from 0 to 65535")
    return host, int(port_text)


class _Model(BaseModel):
    """Every config model: unknown keys refused, frozen, no inf or nan, durations bounded."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, allow_inf_nan=False)

    @field_validator("*")
    @classmethod
    def _bounded_duration(cls, value: Any, info: ValidationInfo) -> Any:
        """A number in a key named for its unit (`_ms`, `_s`, `_h`, `_days`) is at most MAX_DURATION_S;
        any other number (a count, a size, a price) at most MAX_COUNT."""
        name = info.field_name or ""
        if isinstance(value, int | float) and not isinstance(value, bool):
            for suffix, unit_s in _UNIT_SUFFIXES_S:
                if name.endswith(suffix):
                    limit = MAX_DURATION_S / unit_s
                    if not math.isfinite(value) or value > limit:
                        raise ValueError(f"expected at most {limit:g} (ten years), got {clip(value)}")
                    break
            else:
                if not math.isfinite(value) or abs(value) > MAX_COUNT:
                    raise ValueError(f"expected at most {MAX_COUNT:,}, got {clip(value)}")
        return value
