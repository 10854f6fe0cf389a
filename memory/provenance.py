"""Where a memory commit's content came from: the model's own text, a tool result, a human's
message, or the operator. Recorded on the commit itself, as the trailers `Source` (one or more of
`SOURCES`, comma-separated) and `Source-Ref` (the tools' names, the messages' ids), so the record
travels with the repository and a commit made outside the memory tool simply has none.

A write is found to carry a tool result or a human message when a run of `RUN_WORDS` consecutive
words of it (case and whitespace aside) occurs in that text, or, for a write shorter than that,
when all of it does: a short phrase in common is wording, a run of eight words is a copy. Text
copied from a human's message counts as the human's even where a tool (the recall tool) handed it
over; whatever else the write holds is the model's own. The operator's commits (a revert, the
bootstrap layout) are the operator's whatever they hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

MODEL, TOOL_RESULT, HUMAN, OPERATOR = "model", "tool_result", "human", "operator"
SOURCES = (MODEL, TOOL_RESULT, HUMAN, OPERATOR)
TRAILER = "Source"
REF_TRAILER = "Source-Ref"
RUN_WORDS = 8  # a run this long in common is a copy, not shared wording
MIN_WORDS = 3  # a write shorter than a run is matched whole, if it has at least this many words
REFS_SHOWN = 5  # at most this many refs on the trailer (the rest counted)


@dataclass(frozen=True, kw_only=True)
class Origin:
    """A text the wake was given: a tool's answer (`ref`: the tool's name) or a human's message
    (`ref`: its id)."""

    source: str  # TOOL_RESULT or HUMAN
    ref: str
    text: str


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where one commit's content came from: its sources, in `SOURCES` order, and their refs."""

    sources: tuple[str, ...] = (MODEL,)
    refs: tuple[str, ...] = ()

    def trailers(self) -> dict[str, str]:
        refs = list(self.refs[:REFS_SHOWN]) + ([f"+{len(self.refs) - REFS_SHOWN} more"] if len(self.refs) > REFS_SHOWN else [])
        return {TRAILER: ", ".join(self.sources), **({REF_TRAILER: ", ".join(refs)} if refs else {})}


OPERATOR_WRITE = Provenance(sources=(OPERATOR,))


def _words(text: str) -> list[str]:
    return text.casefold().split()


def _runs(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _contains(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    return f" {' '.join(needle)} " in f" {' '.join(haystack)} "


def classify(content: str, origins: Iterable[Origin]) -> Provenance:
    """The provenance of a write of `content` in a wake that was given `origins`."""
    words = _words(content)
    if len(words) < MIN_WORDS:
        return Provenance()
    whole = len(words) < RUN_WORDS
    mine = _runs(words, RUN_WORDS) if not whole else set()
    humans: list[str] = []
    tools: list[str] = []
    claimed: set[tuple[str, ...]] = set()  # the runs a human's message accounts for
    for origin in sorted(origins, key=lambda o: o.source != HUMAN):  # humans first: theirs stay theirs
        theirs = _words(origin.text)
        if whole:
            hit = _contains(theirs, words) and not (origin.source == TOOL_RESULT and humans)
        else:
            found = mine & _runs(theirs, RUN_WORDS)
            if origin.source == HUMAN:
                claimed |= found
            else:
                found -= claimed
            hit = bool(found)
        if hit:
            (humans if origin.source == HUMAN else tools).append(origin.ref)
    sources = tuple(s for s, refs in ((TOOL_RESULT, tools), (HUMAN, humans)) if refs)
    return Provenance(sources=sources, refs=tuple(dict.fromkeys([*tools, *humans]))) if sources else Provenance()


def strings(value: object) -> Iterator[str]:
    """Every string in a tool's answer: the answer itself, or each string inside the JSON it is."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            yield value
            return
        if isinstance(decoded, str):
            yield decoded
        else:
            yield from strings(decoded)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def of_trailers(trailers: Mapping[str, str]) -> Provenance | None:
    """A commit's provenance as its trailers record it; None for a commit that records none."""
    text = trailers.get(TRAILER)
    if not text:
        return None
    sources = tuple(s.strip() for s in text.split(",") if s.strip())
    refs = tuple(r.strip() for r in trailers.get(REF_TRAILER, "").split(",") if r.strip())
    return Provenance(sources=sources, refs=refs)


def describe(found: Provenance | None) -> str:
    """Where a commit's content came from, in words (the `memory` block, `wake memory log`)."""
    if found is None:
        return "not recorded (a commit made outside the memory tool, or before sources were recorded)"
    humans = [r for r in found.refs if r.startswith("message ")]
    tools = [r for r in found.refs if r not in humans]
    words = {
        MODEL: "the model's own text",
        TOOL_RESULT: f"a tool result ({', '.join(tools)})" if tools else "a tool result",
        HUMAN: f"a human's message ({', '.join(humans)})" if humans else "a human's message",
        OPERATOR: "the operator",
    }
    return " and ".join(words.get(s, s) for s in found.sources)
