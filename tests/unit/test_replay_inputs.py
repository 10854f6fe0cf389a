"""Inputs an outsider controls in `wake replay` and `wake eval`: the options' text (--since, a
selection file), the arguments a model wrote, and the text a model or a tool wrote that the
report prints. Property tests: each is one clear refusal or a value, never a traceback, and
nothing printed can drive the operator's terminal."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from untrusted.folding import is_control
from wake.cli.replay import _selection_file, _since, shown
from wake.replay import compare, evaluate
from wake.replay.recording import canonical_arguments


@given(st.text())
def test_shown_text_holds_no_control_character_but_the_newline(text: str) -> None:
    out = shown(text)
    assert all(ch == "\n" or not is_control(ch) for ch in out)
    assert out.count("\n") == text.count("\n")


def test_shown_keeps_an_escape_sequence_visible() -> None:
    assert shown("ok\x1b[2Jgone") == "ok\\u001b[2Jgone"


@given(st.text(max_size=80))
def test_since_is_a_time_or_one_clear_refusal(value: str) -> None:
    try:
        got = _since(value)
    except click.BadParameter as exc:
        assert "\n" not in exc.message and len(exc.message) < 300
        return
    assert isinstance(got, dt.datetime) and got.tzinfo is not None


def test_since_takes_durations_and_iso_times() -> None:
    assert _since("2026-11-23") == dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    week = _since("7d")
    assert isinstance(week, dt.datetime) and dt.timedelta(days=6) < dt.datetime.now(dt.UTC) - week < dt.timedelta(days=8)
    with pytest.raises(click.BadParameter):
        _since("last tuesday")


@given(st.binary(max_size=200))
def test_a_selection_file_is_ids_or_one_clear_refusal(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("sel") / "selection.txt"
    path.write_bytes(data)
    try:
        ids = _selection_file(str(path))
    except click.BadParameter as exc:
        assert "UnicodeDecodeError" in exc.message
        return
    assert all(i and "#" not in i and i == i.strip() for i in ids)


def test_a_selection_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(click.BadParameter, match="cannot read"):
        _selection_file(str(tmp_path / "missing.txt"))


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10)


@given(st.dictionaries(st.text(max_size=5), JSONISH, max_size=4))
def test_arguments_compare_equal_however_they_were_written(arguments: dict[str, object]) -> None:
    spaced = json.dumps(arguments, indent=3)
    tight = json.dumps(dict(reversed(list(arguments.items()))), separators=(",", ":"))
    assert canonical_arguments(spaced) == canonical_arguments(tight) == canonical_arguments(arguments)


@given(st.text())
def test_any_text_a_model_wrote_as_arguments_is_compared_not_raised(text: str) -> None:
    assert isinstance(canonical_arguments(text), str)


CALLS = st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["a", "b", "c"]), st.sampled_from(["{}", '{"x":1}', '{"x":2}'])), max_size=8)


@given(CALLS, st.text(max_size=20))
def test_the_same_decisions_have_no_divergence_and_a_changed_call_is_found_at_its_turn(calls: list[tuple[int, str, str]], final: str) -> None:
    decided = [compare.Decided(turn=t, tool=n, arguments=a) for t, n, a in sorted(calls)]
    assert compare.first_divergence(decided, list(decided), final, final) is None
    if decided:
        changed = [*decided[:-1], compare.Decided(turn=decided[-1].turn, tool="zz", arguments="{}")]
        div = compare.first_divergence(decided, changed, final, final)
        assert div is not None and div["turn"] == decided[-1].turn and div["kind"] == "call"
    div = compare.first_divergence(decided, list(decided), final, final + "!")
    assert div is not None and div["kind"] == "final"


@given(st.lists(st.integers(), max_size=30, unique=True), st.integers(0, 40), st.integers())
def test_a_sample_is_the_same_for_the_same_seed_and_keeps_the_order(ids: list[int], n: int, seed: int) -> None:
    got = evaluate.sample(ids, n, seed)
    assert got == evaluate.sample(ids, n, seed)
    assert len(got) == min(n, len(ids)) and got == [i for i in ids if i in set(got)]


def test_a_wake_is_quiet_only_when_its_loop_completed_with_nothing_or_the_ok_token() -> None:
    assert evaluate.is_quiet(None, 0, "NOTHING", completed=True) and evaluate.is_quiet(" NOTHING\n", 0, "NOTHING", completed=True)
    assert not evaluate.is_quiet(None, 0, "NOTHING", completed=False)  # a failed wake says nothing, and is not quiet
    assert not evaluate.is_quiet("NOTHING", 1, "NOTHING", completed=True)  # it wrote something
    assert not evaluate.is_quiet("Wrote a note.", 0, "NOTHING", completed=True)
