"""The range an id prefix spans, and the prefixes that are refused."""

from __future__ import annotations

import uuid

import pytest

from ledgers import ids
from ledgers.errors import AmbiguousPrefix


def test_a_prefix_spans_every_id_that_starts_with_it() -> None:
    low, high = ids.prefix_range("0A1B")
    assert (low, high) == (uuid.UUID("0a1b0000-0000-0000-0000-000000000000"), uuid.UUID("0a1bffff-ffff-ffff-ffff-ffffffffffff"))
    low, high = ids.prefix_range("0a1b2c3d-4e")
    assert str(low) == "0a1b2c3d-4e00-0000-0000-000000000000" and str(high) == "0a1b2c3d-4eff-ffff-ffff-ffffffffffff"
    for inside in (uuid.UUID("0a1b2c3d-4e00-0000-0000-000000000000"), uuid.UUID("0a1b2c3d-4e99-4000-8000-0000000000ff")):
        assert low <= inside <= high and str(inside).startswith("0a1b2c3d-4e")
    assert ids.prefix_range(str(low)) == (low, low)  # a whole id is the range of itself


@pytest.mark.parametrize("text", ["", "0", "0a1", "0A1"])
def test_fewer_than_four_hex_digits_are_too_short(text: str) -> None:
    with pytest.raises(ids.BadPrefix, match="too short to name one row: give at least 4 hex digits"):
        ids.prefix_range(text)


@pytest.mark.parametrize("text", ["%", "_", "abcd%", "ab_d", "0a1b-", "0a1b2c3d4e", "g123", "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d6"])
def test_anything_but_the_start_of_an_id_is_refused(text: str) -> None:
    with pytest.raises(ids.BadPrefix, match="is not an id or the start of one"):
        ids.prefix_range(text)


def test_an_ambiguous_prefix_names_its_matches_and_how_many_more() -> None:
    matches = [uuid.UUID(int=n) for n in range(1, 3)]
    assert str(AmbiguousPrefix("wake", "0000", matches, 2)) == f"'0000' matches 2 wakes: {matches[0]}, {matches[1]} (give more of the id)"
    assert "and 5 more" in str(AmbiguousPrefix("wake", "0000", matches, 7))
