"""Anchors are what an agent (or whatever wrote into its world) gives the fact tools: every input
the parser, the coverage rule and the look-alike check can meet is answered by one clear refusal
or a well-formed anchor, never a traceback (issue 39)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from codecheck import coverage, names, pysource, typed_anchors

_TEXT = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["a.b", "pkg.mod.f", "x", "rich/live", "../x", "/abs", "a b", "pygm\u0435nts", "add_r\u043ew",
                     "total, sequence=None, *, x=1", "x): pass\ndef y(", "80", "'s'", "(1, 2)", "f()", "lambda: 1",
                     "[" * 200, "*" * 3, "self, /, a", "**kw", "1e999", "\x00", "\u202e", "extra:http2"]),
)
_KINDS = st.sampled_from([*typed_anchors.TYPES, "hunch", 1, None])
_KEYS = st.sampled_from(["type", "ref", "where", "ecosystem", "scope", "params", "value", "anchor", "inferred", "x"])

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5), max_leaves=12)


@st.composite
def _anchor(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = {"type": draw(_KINDS)}
    for key in draw(st.lists(_KEYS, max_size=4, unique=True)):
        raw[key] = draw(_TEXT) if key != "anchor" else draw(_anchor() if draw(st.booleans()) else _JSON)
    return raw


@settings(max_examples=400)
@given(st.one_of(st.lists(_anchor(), max_size=4), _JSON, _TEXT))
def test_any_input_is_parsed_whole_or_refused_in_one_line(raw: Any) -> None:
    try:
        parsed = typed_anchors.parse(raw)
    except typed_anchors.AnchorError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) < 2000
        assert "Traceback" not in message
        return
    assert typed_anchors.parse(typed_anchors.to_json(parsed)) == parsed  # what is stored reads back the same
    names.lookalikes(parsed, None)  # no workspace: the ASCII-skeleton rule, never an exception
    assert isinstance(coverage.uncovered(str(raw)[:300], parsed), list)


@settings(max_examples=300)
@given(st.text(max_size=120))
def test_params_and_values_from_any_text_are_canonical_or_refused(text: str) -> None:
    for read in (pysource.parameters, pysource.literal):
        try:
            canonical = read(text)
        except ValueError as exc:
            assert "\n" not in str(exc)
        else:
            assert read(canonical) == canonical  # the canonical form is a fixed point


@settings(max_examples=300)
@given(st.text(max_size=300), st.lists(st.sampled_from(["pygments", "rich.progress.track", "rich/_windows.py", "X_Y"]), max_size=3))
def test_the_coverage_rule_reads_any_value(value: str, refs: list[str]) -> None:
    parsed = typed_anchors.parse([{"type": "file" if "/" in r else "symbol" if "." in r else "import", "ref": r} for r in refs])
    missing = coverage.uncovered(value, parsed)
    assert all(isinstance(m, str) and m for m in missing)
    if not parsed:
        assert missing == []
