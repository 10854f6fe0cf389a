"""The claim-probe instrument, with the known failures of earlier instruments (docs/epistemic.md) as broken instruments."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from surfaces import probe
from surfaces.probe import Instrument, Outcome, ProbeSpec, ProbeSpecError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    (r / "package.json").write_text('{"name": "wake", "version": "0.1.0"}\n')
    (r / "notes.txt").write_text("the bug is absent here; absent, absent.\n")  # the literal token, 3 times
    (r / "empty.txt").write_text("")
    (r / "dir").mkdir()
    return r


def honest(root: Path, **kw: object) -> Instrument:
    return Instrument.create([root], **kw)  # type: ignore[arg-type]


def yes_man(path: Path, spec: ProbeSpec, max_file_bytes: int) -> Outcome:
    """Stage 1 of the known failures: checks only that the file exists, ignores needle and negate."""
    if path.exists():
        return Outcome(verdict="verified", evidence={"path": str(path), "size_bytes": path.stat().st_size})
    return Outcome(verdict="falsified", evidence={"path": str(path)})


_ASSERTS_MISSING = re.compile(r"\b(?:does\s+not\s+contain|not\s+contain|missing|absent|lacks)\b", re.I)


def regex_polarity(path: Path, spec: ProbeSpec, max_file_bytes: int) -> Outcome:
    """Stage 2 of the known failures: counts the needle, but infers negation from the assertion's wording."""
    negate = bool(_ASSERTS_MISSING.search(spec.assertion or ""))
    honest_spec = ProbeSpec(target=spec.target, mode=spec.mode, needle=spec.needle, negate=negate if spec.mode == "contains" else False)
    return probe.evaluate(path, honest_spec, max_file_bytes)


def test_existence_is_not_content(root: Path) -> None:
    result = honest(root).probe(ProbeSpec(target="package.json", mode="contains", needle="zzz_nonexistent_string_qqq_9481"))
    assert result.verdict == "falsified"
    assert result.evidence["match_count"] == 0 and result.evidence["size_bytes"] == (root / "package.json").stat().st_size
    assert result.evidence["path"] == str(root / "package.json") and result.evidence["mode"] == "contains"
    present = honest(root).probe(ProbeSpec(target="package.json", mode="contains", needle='"name"'))
    assert present.verdict == "verified" and present.evidence["match_count"] == 1 and present.trusted


def test_the_word_absent_is_a_literal_needle(root: Path) -> None:
    found = honest(root).probe(ProbeSpec(target="notes.txt", mode="contains", needle="absent"))
    assert found.verdict == "verified" and found.evidence["match_count"] == 3
    negated = honest(root).probe(ProbeSpec(target="notes.txt", mode="contains", needle="absent", negate=True))
    assert negated.verdict == "falsified" and negated.evidence["match_count"] == 3
    phrase = honest(root).probe(ProbeSpec(target="notes.txt", mode="contains", needle="does not contain", negate=True))
    assert phrase.verdict == "verified_missing" and phrase.evidence["match_count"] == 0


@pytest.mark.parametrize("spec_kw", [
    {"target": "notes.txt", "mode": "contains", "needle": "absent"},
    {"target": "notes.txt", "mode": "contains", "needle": "zzz", "negate": True},
    {"target": "package.json", "mode": "contains", "needle": "zzz"},
    {"target": "gone.txt", "mode": "missing"},
    {"target": "package.json", "mode": "exists"},
])
def test_assertion_wording_never_changes_a_verdict(root: Path, spec_kw: dict[str, object]) -> None:
    inst = honest(root)
    results = [
        inst.probe(ProbeSpec(**spec_kw, assertion=a))  # type: ignore[arg-type]
        for a in (None, "the bug is absent", "the file does not contain it", "it is missing and lacks the line", "it is present")
    ]
    assert len({r.verdict for r in results}) == 1
    assert len({tuple(sorted((k, str(v)) for k, v in r.evidence.items())) for r in results}) == 1
    assert all(r.trusted for r in results)


def test_the_self_test_passes_for_the_honest_instrument(root: Path) -> None:
    test = honest(root).self_test()
    assert test.passed, test.controls
    names = {c["name"] for c in test.controls}
    assert {"escape by ..", "escape by symlink", "contains/needle absent (file exists)"} <= names


@pytest.mark.parametrize("broken", [yes_man, regex_polarity], ids=["existence-for-content", "regex-polarity"])
def test_an_instrument_failing_its_controls_never_reports_verified(root: Path, broken: probe.Evaluate) -> None:
    inst = Instrument.create([root], evaluate_fn=broken)
    test = inst.self_test()
    assert not test.passed
    assert any(not c["ok"] for c in test.controls)
    specs = [
        ProbeSpec(target="package.json", mode="contains", needle='"name"'),
        ProbeSpec(target="package.json", mode="contains", needle="zzz_nonexistent_string_qqq_9481"),
        ProbeSpec(target="notes.txt", mode="contains", needle="absent", assertion="the bug is absent"),
        ProbeSpec(target="package.json", mode="exists"),
        ProbeSpec(target="gone.txt", mode="missing"),
    ]
    for spec in specs:
        result = inst.probe(spec)
        assert result.verdict == "error", spec
        assert result.instrument_state == "failed"
        assert "failed its dual-needle controls" in result.evidence["cause"]


def test_the_paired_run_on_the_target_catches_an_instrument_that_fails_only_there(root: Path) -> None:
    def blind_to_package_json(path: Path, spec: ProbeSpec, max_file_bytes: int) -> Outcome:
        if path.name == "package.json" and spec.mode == "contains":
            return Outcome(verdict="verified", evidence={"path": str(path), "match_count": 1})
        return probe.evaluate(path, spec, max_file_bytes)

    inst = Instrument.create([root], evaluate_fn=blind_to_package_json)
    assert inst.self_test().passed  # the fixture alone cannot see it
    result = inst.probe(ProbeSpec(target="package.json", mode="contains", needle="zzz"))
    assert result.verdict == "error" and result.instrument_state == "failed"
    failed = [c for c in result.controls if not c["ok"]]
    assert failed and all(c["on"] == "target" for c in failed)


def test_the_paired_existence_run_catches_a_lie_about_the_target(root: Path) -> None:
    def sees_a_ghost(path: Path, spec: ProbeSpec, max_file_bytes: int) -> Outcome:
        if path.name == "gone.txt":  # claims the missing file is there, whatever it is asked
            return Outcome(verdict="verified" if spec.mode == "exists" else "falsified", evidence={"path": str(path)})
        return probe.evaluate(path, spec, max_file_bytes)

    inst = Instrument.create([root], evaluate_fn=sees_a_ghost)
    assert inst.self_test().passed
    result = inst.probe(ProbeSpec(target="gone.txt", mode="exists"))
    assert result.verdict == "error" and result.evidence["untrusted_verdict"] == "verified"
    assert {c["name"] for c in result.controls if not c["ok"]} == {"target/exists", "target/missing"}
    assert inst.probe(ProbeSpec(target="package.json", mode="exists")).verdict == "verified"


def test_dotdot_escape_is_an_error_naming_the_cause(root: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("password")
    result = honest(root).probe(ProbeSpec(target="../secret.txt", mode="contains", needle="password"))
    assert result.verdict == "error" and "'..' escapes the probe roots" in result.evidence["cause"]
    assert result.resolved_path is None
    outside = honest(root).probe(ProbeSpec(target=str(tmp_path / "secret.txt"), mode="exists"))
    assert outside.verdict == "error" and "outside every probe root" in outside.evidence["cause"]
    inside = honest(root).probe(ProbeSpec(target="dir/../package.json", mode="exists"))
    assert inside.verdict == "verified"


def test_symlink_escape_is_an_error_naming_the_cause(root: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("password")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    (root / "dirlink").symlink_to(tmp_path)
    for target in ("link.txt", "dirlink/secret.txt"):
        result = honest(root).probe(ProbeSpec(target=target, mode="contains", needle="password"))
        assert result.verdict == "error", target
        assert "symlink escapes the probe roots" in result.evidence["cause"]
        assert str(tmp_path / "secret.txt") in result.evidence["cause"]
    (root / "inner.txt").symlink_to(root / "package.json")
    assert honest(root).probe(ProbeSpec(target="inner.txt", mode="contains", needle="wake")).verdict == "verified"


def test_a_root_that_is_a_symlink_still_holds_its_files(root: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert Instrument.create([alias]).probe(ProbeSpec(target="package.json", mode="exists")).verdict == "verified"


def test_modes_and_their_verdicts(root: Path) -> None:
    inst = honest(root)
    assert inst.probe(ProbeSpec(target="gone.txt", mode="missing")).verdict == "verified_missing"
    assert inst.probe(ProbeSpec(target="package.json", mode="missing")).verdict == "falsified"
    assert inst.probe(ProbeSpec(target="gone.txt", mode="exists")).verdict == "falsified"
    assert inst.probe(ProbeSpec(target="dir", mode="exists")).verdict == "verified"
    assert inst.probe(ProbeSpec(target="gone.txt", mode="contains", needle="x")).verdict == "falsified"
    # the absence of a file is not the absence of its content
    no_file = inst.probe(ProbeSpec(target="gone.txt", mode="contains", needle="x", negate=True))
    assert no_file.verdict == "error" and "does not exist" in no_file.evidence["cause"]
    assert inst.probe(ProbeSpec(target="dir", mode="contains", needle="x")).verdict == "error"
    assert inst.probe(ProbeSpec(target="empty.txt", mode="contains", needle="x", negate=True)).verdict == "verified_missing"
    big = honest(root, max_file_bytes=10).probe(ProbeSpec(target="package.json", mode="contains", needle="wake"))
    assert big.verdict == "error" and "max_file_bytes" in big.evidence["cause"]


def test_no_roots_means_no_probe(tmp_path: Path) -> None:
    result = Instrument.create([]).probe(ProbeSpec(target="x", mode="exists"))
    assert result.verdict == "error" and "no probe roots" in result.evidence["cause"]


@pytest.mark.parametrize("kw, message", [
    ({"target": "a", "mode": "contains"}, "needs a non-empty literal needle"),
    ({"target": "a", "mode": "contains", "needle": ""}, "needs a non-empty literal needle"),
    ({"target": "a", "mode": "exists", "needle": "x"}, "takes no needle"),
    ({"target": "a", "mode": "exists", "negate": True}, "use mode missing"),
    ({"target": "a", "mode": "absent"}, "must be one of exists, missing, contains"),
    ({"target": " ", "mode": "exists"}, "non-empty path"),
])
def test_malformed_specs_are_refused(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ProbeSpecError, match=re.escape(message)):
        ProbeSpec(**kw)  # type: ignore[arg-type]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_target_is_an_error(root: Path) -> None:
    secret = root / "locked.txt"
    secret.write_text("x")
    secret.chmod(0)
    try:
        result = honest(root).probe(ProbeSpec(target="locked.txt", mode="contains", needle="x"))
    finally:
        secret.chmod(0o600)
    assert result.verdict == "error" and "cannot read" in result.evidence["cause"]


def test_a_symlink_is_followed_before_the_dotdot_after_it(root: Path, tmp_path: Path) -> None:
    """`dirlink/../x` is what the system says it is: the `x` beside the link's target."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (root / "dirlink").symlink_to(outside / "sub")
    (root / "x.txt").write_text("inside")  # what a text-only collapse of `dirlink/..` would find
    target = "dirlink/../x.txt"
    assert not os.path.exists(root / target)  # the system: there is no such file
    result = honest(root).probe(ProbeSpec(target=target, mode="exists"))
    assert result.verdict == "error" and "symlink escapes the probe roots" in result.evidence["cause"]
    assert str(outside / "x.txt") in result.evidence["cause"]

    # a link that stays inside: the verdict follows the system in both directions
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "y.txt").write_text("beside the target")
    (root / "inlink").symlink_to(root / "a" / "b")
    inst = honest(root)
    for name in ("y.txt", "x.txt"):
        expected = "verified" if os.path.exists(root / "inlink" / ".." / name) else "falsified"
        assert inst.probe(ProbeSpec(target=f"inlink/../{name}", mode="exists")).verdict == expected, name
    assert inst.probe(ProbeSpec(target="inlink/../y.txt", mode="exists")).verdict == "verified"
    assert inst.probe(ProbeSpec(target="inlink/../y.txt", mode="contains", needle="beside")).evidence["path"] == str(root / "a" / "y.txt")


def test_a_path_the_system_cannot_walk_is_not_found_by_collapsing_it(root: Path) -> None:
    (root / "loop").symlink_to(root / "loop")
    inst = honest(root)
    for target in ("nothere/../package.json", "loop/../package.json"):
        assert not os.path.exists(root / target), target
        assert inst.probe(ProbeSpec(target=target, mode="exists")).verdict in ("falsified", "error"), target
        assert inst.probe(ProbeSpec(target=target, mode="missing")).verdict != "falsified", target
    assert inst.probe(ProbeSpec(target="nothere/../package.json", mode="missing")).verdict == "verified_missing"
    looped = inst.probe(ProbeSpec(target="loop/../package.json", mode="exists"))
    assert looped.verdict == "error" and "cannot stat" in looped.evidence["cause"] and looped.trusted
    # a file is not a directory: the system says there is no such path
    assert inst.probe(ProbeSpec(target="package.json/x", mode="missing")).verdict == "verified_missing"


@pytest.mark.parametrize("data", [
    b"GIF\xff89a\x00\x01\x02",  # decoding while dropping bad bytes gives a needle that is not in the file
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe",
    b"\x00\x00\x00\x00",
    bytes(range(256)),
], ids=["broken-first-line", "png-header", "nul-only", "every-byte"])
def test_a_binary_target_still_gets_its_content_controls(root: Path, data: bytes) -> None:
    (root / "blob.bin").write_bytes(data)
    result = honest(root).probe(ProbeSpec(target="blob.bin", mode="contains", needle="zzz_not_there"))
    on_target = {c["name"]: c for c in result.controls if c["on"] == "target"}
    assert {"target/needle present", "target/negate needle present", "target/needle absent"} <= set(on_target)
    assert all(c["ok"] for c in on_target.values()), on_target
    assert on_target["target/needle present"]["match_count"] >= 1
    assert result.verdict == "falsified" and result.trusted and "controls_not_run" not in result.evidence


def test_an_instrument_blind_to_bytes_fails_on_a_binary_target(root: Path) -> None:
    def text_only(path: Path, spec: ProbeSpec, max_file_bytes: int) -> Outcome:
        """Reads the file as text, dropping what does not decode, and never finds a needle in a binary file."""
        out = probe.evaluate(path, spec, max_file_bytes)
        if spec.mode == "contains" and path.is_file() and b"\xff" in path.read_bytes():
            return Outcome(verdict="verified_missing" if spec.negate else "falsified", evidence={**out.evidence, "match_count": 0})
        return out

    (root / "blob.bin").write_bytes(b"GIF\xff89a\x00\x01\x02")
    inst = Instrument.create([root], evaluate_fn=text_only)
    assert inst.self_test().passed
    result = inst.probe(ProbeSpec(target="blob.bin", mode="contains", needle="GIF", negate=True))
    assert result.verdict == "error" and result.instrument_state == "failed"
    assert "target/needle present" in result.evidence["cause"]


@pytest.mark.parametrize("data, why", [(b"", "it is empty"), (b"\xff\xfe" * 40, "none of its bytes are UTF-8")], ids=["empty", "no-utf8"])
def test_content_controls_that_cannot_run_are_named_in_the_evidence(root: Path, data: bytes, why: str) -> None:
    (root / "blob.bin").write_bytes(data)
    result = honest(root).probe(ProbeSpec(target="blob.bin", mode="contains", needle="x", negate=True))
    assert result.verdict == "verified_missing" and result.trusted
    assert "could not run" in result.evidence["controls_not_run"] and why in result.evidence["controls_not_run"]
    assert why in probe.note(result)
    names = {c["name"] for c in result.controls if c["on"] == "target"}
    assert "target/needle absent" in names and "target/needle present" not in names
