"""Naming a row by a prefix of its uuid, as an operator types it.

A prefix is the start of the id's text form (`0a1b2c3d-4e5f-…`): hex digits, with hyphens only
where the text form has them, and at least `MIN_PREFIX_HEX` hex digits, so that an empty string
or a LIKE wildcard (`%`, `_`) names nothing. It is looked up as the range of ids it spans
(`prefix_range`), on the primary key, with no pattern to escape. A prefix that several rows share
is refused with the newest of them listed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from ledgers.errors import AmbiguousPrefix
from ledgers.errors import BadPrefix as BadPrefix
from ledgers.errors import IdLookupError as IdLookupError

MIN_PREFIX_HEX = 4
LISTED_MATCHES = 5  # an ambiguous prefix names this many of its matches
_HYPHENS = (8, 13, 18, 23)  # where the text form of a uuid has them
_HEX = frozenset("0123456789abcdef")


def prefix_range(text: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The lowest and highest uuid whose text form starts with `text` (case-insensitive).
    Raises `BadPrefix` when `text` is not such a start or has too few hex digits."""
    prefix = text.lower()
    shaped = len(prefix) <= 36 and all(
        (ch == "-") if i in _HYPHENS else (ch in _HEX) for i, ch in enumerate(prefix)
    )
    if not shaped:
        raise BadPrefix(f"{text!r} is not an id or the start of one (hex digits, as in 0a1b2c3d-4e5f-…)")
    digits = prefix.replace("-", "")
    if len(digits) < MIN_PREFIX_HEX:
        raise BadPrefix(f"{text!r} is too short to name one row: give at least {MIN_PREFIX_HEX} hex digits of the id")
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


def unique(rows: Sequence[asyncpg.Record], *, what: str, prefix: str, column: str) -> uuid.UUID | None:
    """The one id in `rows` (a prefix query's page, each row with the exact `total`), None when
    there is none. Raises `AmbiguousPrefix` naming the matches when there are several."""
    if not rows:
        return None
    if len(rows) == 1:
        found: uuid.UUID = rows[0][column]
        return found
    raise AmbiguousPrefix(what, prefix, [r[column] for r in rows], rows[0]["total"])
