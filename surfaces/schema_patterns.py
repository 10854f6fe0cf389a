"""The regular expressions a tool schema may use: the subset grammar compilers understand.

Servers that constrain a model's output to the tool schemas (llama.cpp's json-schema-to-grammar,
and the grammar engines of vLLM and others) turn each `pattern` into a grammar. They understand
an anchored pattern (`^...$`) built from literals, `.`, character classes with plain members,
groups `( )` and `(?: )`, alternation and the quantifiers `* + ? {m} {m,} {m,n}`. A shorthand
class (`\\d \\w \\s`, their negations), a word boundary, a lookaround, a named group, a
backreference, a lazy or possessive quantifier or an inline flag breaks or silently widens
them, so a schema using one is refused at registration. Write `[0-9]` for `\\d`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

# Escapes a grammar compiler reads as one character (outside a class / inside one): llama.cpp's
# json-schema-to-grammar takes these and no others (not even \/ or a class's \^).
_LITERAL_ESCAPES = frozenset("^$.[](){}|*+?\\-\"tnr")
_CLASS_ESCAPES = frozenset("[]\\-\"tnr")
_HEX_ESCAPES = {"x": 2, "u": 4}
_NAMED = {
    "d": "\\d (write [0-9])", "D": "\\D (write [^0-9])", "w": "\\w (write [A-Za-z0-9_])", "W": "\\W",
    "s": "\\s (write [ \\t\\n\\r])", "S": "\\S", "b": "a word boundary \\b", "B": "\\B",
    "A": "\\A (write ^)", "Z": "\\Z (write $)", "z": "\\z", "p": "a Unicode property \\p{...}", "P": "\\P{...}",
}


def patterns(schema: object, where: str = "parameters") -> Iterator[tuple[str, str]]:
    """Every regular expression in a JSON schema: (where it is, the pattern)."""
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            here = f"{where}.{key}"
            if key == "pattern" and isinstance(value, str):
                yield here, value
            elif key == "patternProperties" and isinstance(value, Mapping):
                for name, sub in value.items():
                    yield f"{here} key", str(name)
                    yield from patterns(sub, f"{here}[{name!r}]")
            elif key not in ("enum", "const", "default", "examples"):
                yield from patterns(value, here)
    elif isinstance(schema, list):
        for n, item in enumerate(schema):
            yield from patterns(item, f"{where}[{n}]")


def problem(pattern: str) -> str | None:  # noqa: C901 (one check per construct a grammar compiler refuses, in order)
    """Why a grammar compiler cannot take `pattern`, or None when it can."""
    if len(pattern) < 2 or not pattern.startswith("^") or not pattern.endswith("$") or pattern.endswith("\\$"):
        return "is not anchored as ^...$ (a grammar matches the whole string)"
    body = pattern[1:-1]
    i, depth = 0, 0
    while i < len(body):
        step = _step(body, i, depth)
        if isinstance(step, str):
            return step
        i, depth = step
    if depth:
        return "has an unbalanced '('"
    return None


def _step(body: str, i: int, depth: int) -> tuple[int, int] | str:
    """Read the construct at `i`: the next position and group depth, or what is wrong with it."""
    c = body[i]
    if c == "\\":
        width = _escape(body, i, _LITERAL_ESCAPES)
        return width if isinstance(width, str) else (i + width, depth)
    if c in "^$":
        return f"has an anchor {c!r} inside it"
    if c == "[":
        end = _class_end(body, i)
        return end if isinstance(end, str) else (end, depth)
    if c == "(":
        if body.startswith("(?", i) and not body.startswith("(?:", i):
            return f"uses {body[i:i + 3]!r}: a lookaround, named group or inline flag"
        return (i + (3 if body.startswith("(?:", i) else 1), depth + 1)
    if c == ")" and depth == 0:
        return "has an unbalanced ')'"
    if c in "*+?}" and i + 1 < len(body) and body[i + 1] in "?+":
        return f"uses a lazy or possessive quantifier {body[i:i + 2]!r}"
    if c == "{" and not _counted(body, i):
        return "has a '{' that is not a repetition {m}, {m,} or {m,n} (escape it as \\{)"
    return (i + 1, depth - 1 if c == ")" else depth)


def _escape(body: str, i: int, allowed: frozenset[str]) -> int | str:
    """The width of the escape at `i`, or what is wrong with it."""
    if i + 1 >= len(body):
        return "ends with a lone backslash"
    e = body[i + 1]
    if e in _HEX_ESCAPES:
        digits = body[i + 2:i + 2 + _HEX_ESCAPES[e]]
        if len(digits) != _HEX_ESCAPES[e] or any(d not in "0123456789abcdefABCDEF" for d in digits):
            return f"has a malformed \\{e} escape"
        return 2 + _HEX_ESCAPES[e]
    if e in _NAMED:
        return f"uses {_NAMED[e]}"
    if e.isdigit():
        return f"uses a backreference \\{e}"
    if e == "k":
        return "uses a named backreference \\k"
    if e not in allowed:
        return f"uses the escape \\{e}"
    return 2


def _class_end(body: str, i: int) -> int | str:
    """The index after the character class starting at `i`, or what is wrong with it."""
    j = i + 1
    if j < len(body) and body[j] == "^":
        j += 1
    if j < len(body) and body[j] == "]":
        j += 1  # a literal ']' first in the class
    while j < len(body) and body[j] != "]":
        if body[j] == "\\":
            width = _escape(body, j, _CLASS_ESCAPES)
            if isinstance(width, str):
                return width + " inside a character class"
            j += width
            continue
        if body[j] == "[":
            return "nests '[' in a character class (a POSIX class or a set operation)"
        j += 1
    if j >= len(body):
        return "has an unterminated character class"
    return j + 1


def _counted(body: str, i: int) -> bool:
    end = body.find("}", i)
    if end < 0:
        return False
    low, _, high = body[i + 1:end].partition(",")
    return low.isdigit() and (high == "" or high.isdigit())
