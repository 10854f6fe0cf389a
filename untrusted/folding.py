"""Folding attacker-controlled text before it is judged or compared.

- `fold(s)`: NFKC (fullwidth letters, ligatures and compatibility forms to their plain letters),
  then every invisible character removed: the format characters (category Cf: zero-width spaces
  and joiners, bidi controls, tag characters, invisible operators), variation selectors, and
  other default-ignorable code points. Case is kept.
- `skeleton(s)`: TS #39's confusable skeleton of `fold(s)` (ICU): a Cyrillic "о" and a Latin "o"
  have the same skeleton. Two strings that render alike have equal skeletons; the skeleton is for
  comparison only, never for display.
- `invisible(s)`: the invisible and control characters in `s`, each with its code point, for a
  reader who must be told what was there.
- `unconfused(s)`: `fold(s)` with each non-ASCII letter that TS #39 makes a look-alike of an ASCII
  one replaced by it (a Cyrillic "о" reads "o"); ASCII is left as it is (so "I" stays "I", where
  the skeleton would write "l"). For matching English patterns against attacker text.
"""

from __future__ import annotations

import functools
import unicodedata

import icu


def _is_invisible(ch: str) -> bool:
    """Default-ignorable or format: renders as nothing (or reorders what follows)."""
    cp = ord(ch)
    if unicodedata.category(ch) == "Cf":
        return True
    return (
        0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0xE0100 <= cp <= 0xE01EF  # variation selectors supplement
        or 0x180B <= cp <= 0x180F  # Mongolian free variation selectors and vowel separator
        or cp in (0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5)  # combining grapheme joiner, Hangul fillers, Khmer inherent vowels
        or 0xE0000 <= cp <= 0xE0FFF  # tags and unassigned default-ignorables
    )


def is_invisible(ch: str) -> bool:
    return _is_invisible(ch)


def is_control(ch: str) -> bool:
    """C0, DEL and C1 controls, and the line and paragraph separators."""
    return unicodedata.category(ch) == "Cc" or ch in ("\u2028", "\u2029")


def fold(text: str) -> str:
    """NFKC with every invisible character removed (case kept)."""
    visible = "".join(ch for ch in text if not _is_invisible(ch))  # first, so that what they split composes
    return "".join(ch for ch in unicodedata.normalize("NFKC", visible) if not _is_invisible(ch))


@functools.lru_cache(maxsize=1)
def _checker() -> icu.SpoofChecker:
    return icu.SpoofChecker()


def skeleton(text: str) -> str:
    """TS #39's skeleton of the folded text: equal for strings that render alike."""
    return str(_checker().getSkeleton(0, fold(text)))


def confusable(a: str, b: str) -> bool:
    """`a` and `b` differ but look alike."""
    return a != b and skeleton(a) == skeleton(b)


@functools.lru_cache(maxsize=4096)
def _ascii_lookalike(ch: str) -> str:
    """The ASCII letter `ch` imitates (its skeleton, when that is one ASCII character), else `ch`."""
    shown = str(_checker().getSkeleton(0, ch))
    return shown if len(shown) == 1 and shown.isascii() and shown.isalnum() else ch


def unconfused(text: str) -> str:
    """`fold(text)` with the non-ASCII look-alikes of ASCII letters and digits replaced by them."""
    return "".join(ch if ch.isascii() else _ascii_lookalike(ch) for ch in fold(text))


def invisible(text: str) -> list[str]:
    """The invisible and control characters of `text` (other than newline and tab), as U+XXXX."""
    return [f"U+{ord(ch):04X}" for ch in text if (_is_invisible(ch) or is_control(ch)) and ch not in "\n\t"]


def warm() -> None:
    """Load ICU's confusables data now, not inside the first caller's time budget."""
    skeleton("warm")
