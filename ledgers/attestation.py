"""Attestation: is a `saw` fact's value actually in the raw message it cites? (docs/design.md, "Lessons")

A value is attested by a message when, after normalization, either

1. the value's tokens occur in the message as a contiguous run of whole tokens (containment on
   token boundaries: "kvällsskiften, från" is contained in "på kvällsskiften från oktober";
   "Kvällsskift" is not, nor is "art" in "a party": a word must match words), or
2. at least `MIN_SHARE_PCT` (60%) of the value's distinct content tokens occur in the message, and
   at least `MIN_SHARED` (2) of them do.

Normalization: `untrusted.folding.unconfused` (Unicode NFKC, invisible characters removed, non-ASCII
look-alikes of ASCII letters replaced by them, TS #39: a zero-width space cannot split a word, a
Cyrillic "о" compares as "o"), then case folding (`str.casefold`, so "Kvällsskift" = "KVÄLLSSKIFT"
and "ß" = "ss"). Tokens are the maximal runs of letters and digits (`[^\\W_]+`): punctuation,
underscores and whitespace only separate tokens, so "15:00-23:00" is `15 00 23 00`. The
normalized text is its tokens joined by single spaces. Content tokens are the tokens that are not
in `STOP_WORDS`. docs/facts.md documents the same rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from untrusted import folding

MIN_SHARE_PCT = 60  # integer percent: 3 of 5 is exactly 60%, with no float rounding
MIN_SHARED = 2

# Function words in English and Swedish (the demo agent lives in Stockholm). They carry no
# content, so sharing them attests nothing.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about after again all also am an and any are as at be because been before being but by
    can could did do does doing done for from had has have having he her here hers him his how
    i if in into is it its just me my no nor not of off on once only or our ours out over own
    she so some such than that the their theirs them then there these they this those to too
    under until up very was we were what when where which while who whom why will with would
    you your yours
    och att det i på är en ett som för med till av om har inte jag du vi de den man men så
    var vad när där här han hon mig dig sig oss er dem min din sin vår ni kan ska skulle
    """.split()
)

_TOKEN = re.compile(r"[^\W_]+")


def tokens(text: str) -> list[str]:
    """The normalized tokens of `text`, in order."""
    return _TOKEN.findall(folding.unconfused(text).casefold())


def content_tokens(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in STOP_WORDS}


@dataclass(frozen=True, kw_only=True)
class Attestation:
    attested: bool
    how: str  # contained | overlap | none
    shared: int
    of: int

    @property
    def reason(self) -> str:
        if self.how == "contained":
            return "the value occurs in the cited message"
        share = f"{self.shared} of {self.of} content tokens in the cited message"
        return f"{share} (needs ≥{MIN_SHARE_PCT}% and ≥{MIN_SHARED})" if not self.attested else share


def normalized(text: str) -> str:
    """`text` as containment compares it: its tokens joined by single spaces."""
    return " ".join(tokens(text))


def _contains(haystack: str, needle: str) -> bool:
    """`needle`'s tokens as a contiguous run of `haystack`'s (both normalized): padded with the
    separator, a substring match can only start and end on token boundaries."""
    return bool(needle) and f" {needle} " in f" {haystack} "


def attest(value: str, message: str) -> Attestation:
    """Decide whether `message` attests `value` (rules in the module docstring)."""
    value_content = content_tokens(value)
    if _contains(normalized(message), normalized(value)):
        return Attestation(attested=True, how="contained", shared=len(value_content), of=len(value_content))
    shared = len(value_content & content_tokens(message))
    of = len(value_content)
    attested = of > 0 and shared >= MIN_SHARED and shared * 100 >= MIN_SHARE_PCT * of
    return Attestation(attested=attested, how="overlap" if attested else "none", shared=shared, of=of)
