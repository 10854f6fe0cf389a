"""Absence claims made while a block could not be checked (docs/recall.md, "After an outage").

"I found nothing" is true only of a block that could look. When a block failed during a wake and
the wake's final text claims the absence of what that block covers ("nothing is due", "no new
messages"), the claim is not evidence: the daybook entry is kept, marked with the blocks that
could not be checked, the wake's row counts the claims, and the next arrival shows the mark.

A claim is recognised by a small lexicon per block (`LEXICON`), plus `GENERIC` phrases that claim
the absence of anything new and so speak about every block; an operator's SQL source adds its own
phrases (`sql_sources.<name>.absence_claims`). Matching is whole words, case-insensitive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ledgers.vocab import Retrieval
from wake.arrival.engine import Block

# Phrases that claim nothing is there at all: they speak about every block of the wake.
GENERIC: tuple[str, ...] = (
    r"nothing (?:is |was )?new", r"nothing (?:is |was )?due", r"nothing to do", r"nothing (?:was )?found", r"found nothing",
    r"no new messages?", r"nothing (?:has )?changed", r"all quiet",
)
# block -> phrases that claim the absence of what that block covers
LEXICON: Mapping[str, tuple[str, ...]] = {
    "settled_facts": (
        r"no (?:open )?commitments?", r"nothing (?:is )?(?:open|pending|outstanding)", r"no (?:new )?retractions?",
        r"no (?:confirmed )?actions?", r"no settled state",
    ),
    "due_falsifiers": (r"no falsifiers?(?: (?:is|are))? due", r"no falsifiers?"),
    "provenance_facts": (r"no (?:active |new )?facts?",),
    "living_summaries": (r"no (?:living )?summar(?:y|ies)",),
    "daybook": (r"(?:the )?daybook is empty", r"no (?:earlier |previous )?(?:daybook )?entries"),
    "recent_wakes": (r"no (?:earlier|previous) wakes?",),
    "graph": (r"(?:the )?graph is empty", r"no (?:entities|relationships)"),
}


def _pattern(phrases: Iterable[str]) -> re.Pattern[str] | None:
    phrases = tuple(phrases)
    return re.compile(r"(?<!\w)(?:" + "|".join(phrases) + r")(?!\w)", re.IGNORECASE) if phrases else None


_GENERIC = _pattern(GENERIC)
_BY_BLOCK = {name: _pattern(phrases) for name, phrases in LEXICON.items()}


def unchecked_claims(text: str, blocks: Sequence[Block], extra: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The failed blocks whose absence `text` claims, in block order. `extra`: more phrases per
    block (an operator's SQL sources)."""
    found = []
    generic = bool(_GENERIC and _GENERIC.search(text))
    for block in blocks:
        if block.retrieval != Retrieval.failed:
            continue
        own = _BY_BLOCK.get(block.name)
        more = _pattern(re.escape(phrase) for phrase in (extra or {}).get(block.name, ()))
        if generic or (own and own.search(text)) or (more and more.search(text)):
            found.append(block.name)
    return found
