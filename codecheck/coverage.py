"""What a fact's value claims that its anchors do not cover: the rule that keeps a verdict to
what was checked.

A fact's anchors are checked; its prose is not. A verdict may only say `verified` for a sentence
whose checkable claims the anchors cover, so the value is read for the claims a reader could
check against code (`claims`), and each one is looked for in the anchors (`uncovered`):

- **identifiers**: anything in backticks; dotted names (`rich.progress.track`, `Console.print`);
  names with an underscore (`add_row`, `JUPYTER_DEFAULT_COLUMNS`), an inner capital
  (`AsyncClient`) or a call's parentheses (`track(`); path-like tokens (`rich/_windows.py`);
- **numbers**: a run of digits standing alone (`80`, `0.28.1`, the `2` of `HTTP/2`);
- **names**: a capitalised word that does not start a sentence (`Windows`, `Pygments`); an
  all-capitals word without digits or underscores (`HTTP`, `JSON`) is an abbreviation, not a
  name, and is not counted;
- **lists**: every word of an enumeration ending in and/or/nor (`httpcore, certifi and idna`)
  one of whose words an anchor names: a list is a claim about each of its members;
- **absence**: a value that says something is not there (`not`, `no`, `never`, `without`,
  `removed`, `dropped`, `no longer`, `n't`) with no `absent` anchor claims an absence no anchor
  states.

An identifier is covered when an anchor names it: it is one of the parts of an anchor's `ref`,
`where`, `params` or `value` (split at `.`, `/`, punctuation), compared case-insensitively; a
dotted one when every part is. A name is covered by a part or by a word of one (`_windows.py`
covers `Windows`; package names compared as PEP 503 normalizes them); a number when the digits
stand in an anchor's text. What this cannot do: read meaning. "X dropped Windows support"
anchored on `absent file x/_windows.py` is covered (the file is gone, whatever else supports
Windows); an ordinary lowercase word (`cache`, `retries`) is never a claim; and a claim the
value words in a way none of these shapes catch is not seen. It keeps the mark from claiming
the whole sentence for what an anchor checked of it; it does not make the sentence true.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

from codecheck.typed_anchors import Anchor

MAX_SHOWN = 6  # uncovered claims named in a verdict

_BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
_TOKEN = re.compile(r"[^\W\d][\w]*(?:[./][\w]+)*\(?|\d+(?:\.\d+)*", re.UNICODE)
_NUMBER = re.compile(r"^\d+(?:\.\d+)*$")
_SPLIT = re.compile(r"[^\w]+")
_WORDS = re.compile(r"[_\-]+")
_OPENERS = ".!?:;-*(\"\n"  # a word after one of these (and spaces) starts a sentence or an item
_NEGATION = re.compile(r"\b(?:not|no|never|without|removed|dropped|drops|lacks?|absent|none|nowhere|no longer)\b|n't\b",
                       re.IGNORECASE)
# possessive items starting at a token's start: linear in the value, whatever it holds
_ENUMERATION = re.compile(r"(?<![\w.\-])[\w.\-]++(?:(?:\s*+,\s*+(?:and\s++|or\s++)?|\s++(?:and|or|nor)\s++)[\w.\-]++)++")
_CONJUNCTION = re.compile(r"\s(?:and|or|nor)\s")
_ITEM_SPLIT = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|nor)\s+")
_STOP = frozenset("a an and are as at be by for from in into is it its of on or the then to with".split())


def _starts_sentence(text: str, start: int) -> bool:
    """Whether the word at `start` begins the value, a sentence or an item (looked for in the 40
    characters before it, so the rule stays linear in the value)."""
    before = text[max(0, start - 40):start]
    stripped = before.rstrip(" \t")
    if not stripped:
        return start <= 40 or before == ""
    return stripped[-1] in _OPENERS and (stripped[-1] in "(\"\n" or len(stripped) < len(before))


def _shape(token: str, start: int, text: str) -> str | None:
    """What kind of claim a token of the value is: identifier, number, name, or None (a word)."""
    bare = token.rstrip("(")
    if _NUMBER.match(bare):
        return "number"
    if token.endswith("(") or "." in bare or "/" in bare or "_" in bare:
        return "identifier"
    if any(c.isupper() for c in bare[1:]) and not bare.isupper():
        return "identifier"
    if bare[:1].isupper() and not bare.isupper() and not _starts_sentence(text, start):
        return "name"
    if bare.isupper() and (any(c.isdigit() for c in bare)):
        return "identifier"
    return None


def claims(value: str) -> list[tuple[str, str]]:
    """The checkable claims of a value, in order, each once: (token, kind)."""
    found: dict[str, str] = {}
    spans = []
    for match in _BACKTICKED.finditer(value):
        spans.append(match.span())
        for token in _TOKEN.findall(match.group(1)):
            bare = token.rstrip("(").strip("./")
            if bare:
                found.setdefault(bare, "number" if _NUMBER.match(bare) else "identifier")
    for match in _TOKEN.finditer(value):
        if any(a <= match.start() < b for a, b in spans):
            continue
        token = match.group(0)
        bare = token.rstrip("(").strip("./")
        kind = _shape(token, match.start(), value) if bare else None
        if kind is not None:
            found.setdefault(bare, kind)
    return list(found.items())


def _parts(anchors: Iterable[Anchor]) -> tuple[set[str], set[str], str]:
    """The anchors' parts (casefolded), their words, and all their text (for numbers)."""
    from codecheck.fingerprint import canonicalize_name

    parts: set[str] = set()
    texts = []
    for a in anchors:
        for text in (a.ref, a.where, a.expected):
            if not text:
                continue
            texts.append(text)
            for part in _SPLIT.split(text):
                if part:
                    parts.add(part.casefold())
                    if part.endswith("py") and len(part) > 2:
                        parts.add(part[:-2].casefold())
        if a.type == "package":
            parts.add(canonicalize_name(a.ref))
    words = {w for p in parts for w in _WORDS.split(p) if w} | parts
    return parts, words, "\n".join(texts)


def _covered(token: str, kind: str, parts: set[str], words: set[str], text: str) -> bool:
    if kind == "number":
        return re.search(rf"(?<![\d.]){re.escape(token)}(?![\d])", text) is not None
    folded = token.casefold()
    if folded in parts or (kind == "name" and folded in words):
        return True
    pieces = [p for p in _SPLIT.split(folded) if p]
    return bool(pieces) and all(p in parts or p in words for p in pieces)


def uncovered(value: str, anchors: Sequence[Anchor]) -> list[str]:
    """The value's claims no code anchor covers, in order (empty: the anchors cover the value).
    It depends on the text alone, not on the workspace, so it is kept per (value, anchors): a
    steady retrieval reads it from the cache."""
    return list(_uncovered(value, tuple(a for a in anchors if a.is_code)))


@functools.lru_cache(maxsize=4096)
def _uncovered(value: str, code: tuple[Anchor, ...]) -> tuple[str, ...]:
    if not code:
        return ()
    parts, words, text = _parts(code)
    out = [token for token, kind in claims(value) if not _covered(token, kind, parts, words, text)]
    for match in _ENUMERATION.finditer(value):
        items = [i.strip(".") for i in _ITEM_SPLIT.split(match.group(0)) if i.strip(".")]
        items = [i for i in items if i.casefold() not in _STOP]
        if not _CONJUNCTION.search(match.group(0)):
            continue  # "X, exported as Y" is no list: a list ends with and, or or nor
        if len(items) > 1 and any(_covered(i, "name", parts, words, text) for i in items):
            out += [i for i in items if not _covered(i, "name", parts, words, text) and i not in out]
    negation = _NEGATION.search(value)
    if negation is not None and not any(a.negated for a in code):
        out.append(f"'{negation.group(0)}' (an absence no absent anchor states)")
    return tuple(out)


def describe(missing: Sequence[str]) -> str:
    """`Windows, 80 not checked` (at most `MAX_SHOWN` named, then how many more)."""
    shown = ", ".join(missing[:MAX_SHOWN]) + (f" and {len(missing) - MAX_SHOWN} more" if len(missing) > MAX_SHOWN else "")
    return f"{shown} not checked"
