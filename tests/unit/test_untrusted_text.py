"""Folding and skeletons: look-alikes compare equal, invisible characters are gone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from untrusted import folding


def test_lookalikes_share_a_skeleton_and_real_names_do_not() -> None:
    assert folding.confusable("pygm\u0435nts", "pygments")  # Cyrillic e
    assert folding.confusable("add_r\u043ew", "add_row")  # Cyrillic o
    assert folding.confusable("\uff29gnore", "Ignore")  # fullwidth I
    assert not folding.confusable("add_row", "add_col")
    assert not folding.confusable("pygments", "pygments")  # the same string is not a look-alike


def test_fold_removes_invisible_and_normalises_compatibility_forms() -> None:
    assert folding.fold("Ig\u200bnore") == "Ignore"
    assert folding.fold("a\ufe0fb\u2062c\U000e0041") == "abc"  # variation selector, invisible times, a tag
    assert folding.fold("\ufb01le") == "file"  # the fi ligature
    assert folding.invisible("a\u200bb\u202e\x00") == ["U+200B", "U+202E", "U+0000"]


@settings(max_examples=500)
@given(st.text())
def test_fold_is_idempotent_and_leaves_nothing_invisible(s: str) -> None:
    folded = folding.fold(s)
    assert folding.fold(folded) == folded
    assert not any(folding.is_invisible(ch) for ch in folded)
