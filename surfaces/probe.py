"""The claim-probe instrument: checks a claim about a file against the file itself.

A probe is typed, never read from prose (docs/epistemic.md):

- `mode` is `exists`, `missing` or `contains`; `contains` takes a literal `needle` and an explicit
  `negate` ("does not contain"). Nothing else decides polarity: an `assertion` text is kept for the
  record and never read, so a claim that says "absent" or "does not contain" probes exactly like
  one that does not, and a needle that *is* the word "absent" is searched for literally.
- Verdicts: `verified` (the claim holds), `verified_missing` (a claimed absence holds),
  `falsified` (it does not hold), `error` (it could not be checked; `cause` says why).
- Existence is not content: `contains` reads the bytes and counts the needle; a file that exists
  but lacks the needle is `falsified`.
- Paths resolve inside the configured roots only, as the operating system resolves them (a
  symlink before the `..` that follows it); a `..` or a symlink that leads out of them, or an
  absolute path outside them, is an `error` naming the cause.

Dual-needle controls: before a probe's verdict is trusted, the same evaluation function is run on
a fixture it cannot have seen (a fresh temporary directory) with needles known present and known
absent, then on the probe's own target: `exists` against `missing` (they must diverge, as an
independent stat says) and, for `contains`, a needle taken from the target's bytes (binary or
not) and a random one checked absent; when the bytes offer no needle, the evidence says so under
`controls_not_run`. The runs must diverge exactly as expected. An instrument that fails its
controls reports `error`, never `verified`.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from surfaces.errors import Escape
from surfaces.errors import ProbeSpecError as ProbeSpecError

MODES: tuple[str, ...] = ("exists", "missing", "contains")
VERDICTS: tuple[str, ...] = ("verified", "verified_missing", "falsified", "error")
DEFAULT_MAX_FILE_BYTES = 1_048_576
# Wording a regex-reading instrument would mistake for polarity (docs/epistemic.md, stage 2). Every
# control run carries it as its assertion: an instrument that reads prose fails its controls.
CONTROL_ASSERTION = "control: this text says absent, missing and does not contain; it must not change any verdict"
_CONTROL_TEXT = "alpha absent beta\nthe word absent appears three times: absent\n"  # the known failure's literal token "absent", 3 times
_UNDECODABLE = re.compile(r"[\udc80-\udcff]+")  # what surrogateescape makes of bytes that are not UTF-8
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\udc80-\udcff]+")

Mode = Literal["exists", "missing", "contains"]
Verdict = Literal["verified", "verified_missing", "falsified", "error"]


@dataclass(frozen=True, kw_only=True)
class ProbeSpec:
    target: str
    mode: str
    needle: str | None = None
    negate: bool = False
    # Kept for the record only; never read by the instrument.
    assertion: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.target, str) or not self.target.strip():
            raise ProbeSpecError("probe target must be a non-empty path")
        if "\x00" in self.target:
            raise ProbeSpecError("probe target contains a NUL byte")
        if self.mode not in MODES:
            raise ProbeSpecError(f"probe mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not isinstance(self.negate, bool):
            raise ProbeSpecError(f"negate must be true or false, got {self.negate!r}")
        if self.mode == "contains":
            if not isinstance(self.needle, str) or self.needle == "":
                raise ProbeSpecError("mode contains needs a non-empty literal needle")
        else:
            if self.needle is not None:
                raise ProbeSpecError(f"mode {self.mode} takes no needle (use mode contains)")
            if self.negate:
                raise ProbeSpecError(f"negate applies to mode contains only; for the opposite of {self.mode} use mode "
                                     f"{'missing' if self.mode == 'exists' else 'exists'}")

    def describe(self) -> str:
        if self.mode == "contains":
            return f"{self.target} {'does not contain' if self.negate else 'contains'} {self.needle!r}"
        return f"{self.target} {'exists' if self.mode == 'exists' else 'is missing'}"


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What one evaluation found: a verdict and its evidence."""

    verdict: str
    evidence: dict[str, object]


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    spec: ProbeSpec
    resolved_path: str | None
    verdict: str
    evidence: dict[str, object]
    instrument_state: str  # passed | failed: the dual-needle controls of this run
    controls: list[dict[str, object]] = field(default_factory=list)

    @property
    def trusted(self) -> bool:
        return self.instrument_state == "passed"


# -- path resolution ---------------------------------------------------------------------------


def resolve(target: str, roots: Sequence[Path]) -> Path:
    """The target as a path inside one of `roots` (already real paths). A relative target is
    taken relative to the first root. Raises `Escape` naming the cause.

    The path is resolved the way the operating system resolves it: each symlink is followed before
    the `..` after it, so `link/../x` is the `x` beside the link's target, not the one beside the
    link. When the system cannot reach the target (a component is missing, a symlink loops), the
    joined path is returned unresolved so the evaluation's own stat reports what the system says."""
    if not roots:
        raise Escape("no probe roots are configured ([probes] roots)")
    raw = Path(target)
    joined = raw if raw.is_absolute() else roots[0] / raw
    try:
        real, reachable = Path(os.path.realpath(joined, strict=True)), True
    except OSError:
        real, reachable = Path(os.path.realpath(joined)), False
    if not any(real.is_relative_to(r) for r in roots):
        lexical = Path(os.path.normpath(joined))
        if not any(lexical.is_relative_to(r) for r in roots):
            if ".." in raw.parts:
                raise Escape(f"'..' escapes the probe roots: {target!r} normalizes to {lexical}")
            raise Escape(f"{lexical} is outside every probe root ({', '.join(map(str, roots))})")
        raise Escape(f"a symlink escapes the probe roots: {joined} resolves to {real}")
    return real if reachable else joined


def real_roots(roots: Iterable[Path]) -> list[Path]:
    """Roots as real paths, so a root that is itself a symlink still contains its files."""
    return [Path(os.path.realpath(r)) for r in roots]


# -- the evaluation itself ---------------------------------------------------------------------


Evaluate = Callable[[Path, ProbeSpec, int], Outcome]


def evaluate(path: Path, spec: ProbeSpec, max_file_bytes: int) -> Outcome:
    """The honest evaluation: stat for `exists`/`missing`, read and count for `contains`.
    It reads `spec.mode`, `spec.needle` and `spec.negate`, never `spec.assertion`."""
    evidence: dict[str, object] = {
        "path": str(path), "size_bytes": None, "needle": spec.needle, "match_count": None,
        "mode": spec.mode, "negate": spec.negate, "cause": None,
    }

    def out(verdict: str, cause: str | None = None) -> Outcome:
        return Outcome(verdict=verdict, evidence={**evidence, "cause": cause})

    st: os.stat_result | None = None
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):  # both are the system saying "no such path"
        present = False
    except OSError as exc:
        return out("error", f"cannot stat the target: {exc.strerror or exc}")
    else:
        present = True
        evidence["size_bytes"] = st.st_size
    if spec.mode == "exists":
        return out("verified") if present else out("falsified", "the target does not exist")
    if spec.mode == "missing":
        return out("verified_missing") if not present else out("falsified", "the target exists")
    return _contains(path, spec, max_file_bytes, st, evidence, out)


def _contains(
    path: Path, spec: ProbeSpec, max_file_bytes: int, st: os.stat_result | None, evidence: dict[str, object],
    out: Callable[..., Outcome],
) -> Outcome:
    """Mode `contains` (with its `negate`): read the file and count the needle's bytes."""
    if st is None:
        if spec.negate:  # absence of the file is not absence of content
            return out("error", "the target does not exist; 'does not contain' needs a file to read (use mode missing)")
        return out("falsified", "the target does not exist")
    if path.is_dir():
        return out("error", "the target is a directory; contains needs a file")
    if st.st_size > max_file_bytes:
        return out("error", f"the target is {st.st_size} bytes, above probes.max_file_bytes ({max_file_bytes})")
    try:
        data = path.read_bytes()
    except OSError as exc:
        return out("error", f"cannot read the target: {exc.strerror or exc}")
    assert spec.needle is not None
    count = data.count(spec.needle.encode("utf-8"))
    evidence["match_count"] = count
    evidence["size_bytes"] = len(data)
    if spec.negate:
        return out("verified_missing") if count == 0 else out("falsified", f"expected no match, found {count}")
    return out("verified") if count > 0 else out("falsified", "the needle was not found")


# -- the instrument and its controls -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Control:
    """One control run: a probe whose right answer is known in advance."""

    name: str
    spec: ProbeSpec
    expect: str
    expect_matches: int | None = None


def _run_control(control: Control, roots: Sequence[Path], evaluate_fn: Evaluate, max_file_bytes: int) -> dict[str, object]:
    try:
        outcome = evaluate_fn(resolve(control.spec.target, roots), control.spec, max_file_bytes)
        got, matches = outcome.verdict, outcome.evidence.get("match_count")
    except Escape:
        got, matches = "error", None
    except Exception as exc:  # an instrument may break in any way; that is a failed control
        return {"name": control.name, "expect": control.expect, "got": "error", "match_count": None, "ok": False, "raised": repr(exc)}
    ok = got == control.expect and (control.expect_matches is None or matches == control.expect_matches)
    return {"name": control.name, "expect": control.expect, "got": got, "match_count": matches, "ok": ok}


def fixture_controls(nonce: str) -> list[Control]:
    """The dual-needle battery over the self-test fixture (see `self_test`)."""
    a = CONTROL_ASSERTION
    return [
        Control(name="exists/present", spec=ProbeSpec(target="present.txt", mode="exists", assertion=a), expect="verified"),
        Control(name="exists/absent", spec=ProbeSpec(target="nothing.txt", mode="exists", assertion=a), expect="falsified"),
        Control(name="missing/absent", spec=ProbeSpec(target="nothing.txt", mode="missing", assertion=a), expect="verified_missing"),
        Control(name="missing/present", spec=ProbeSpec(target="present.txt", mode="missing", assertion=a), expect="falsified"),
        Control(
            name="contains/needle present (the literal word 'absent')",
            spec=ProbeSpec(target="present.txt", mode="contains", needle="absent", assertion=a),
            expect="verified",
            expect_matches=3,
        ),
        Control(
            name="contains/needle absent (file exists)",
            spec=ProbeSpec(target="present.txt", mode="contains", needle=nonce, assertion=a),
            expect="falsified",
            expect_matches=0,
        ),
        Control(
            name="negate/needle absent",
            spec=ProbeSpec(target="present.txt", mode="contains", needle=nonce, negate=True, assertion=a),
            expect="verified_missing",
            expect_matches=0,
        ),
        Control(
            name="negate/needle present",
            spec=ProbeSpec(target="present.txt", mode="contains", needle="absent", negate=True, assertion=a),
            expect="falsified",
            expect_matches=3,
        ),
        Control(name="escape by ..", spec=ProbeSpec(target="../outside/secret.txt", mode="exists", assertion=a), expect="error"),
        Control(name="escape by symlink", spec=ProbeSpec(target="link.txt", mode="exists", assertion=a), expect="error"),
    ]


def existence_controls(target: str, present: bool | None) -> list[Control]:
    """The paired run on the probe's own target for existence: `exists` and `missing` must diverge,
    and agree with `present`, which the caller learned without the instrument. `None` means the
    caller's own stat failed for another reason than absence (a symlink loop, no permission): then
    both must be `error`."""
    a = CONTROL_ASSERTION
    exists, missing = {True: ("verified", "falsified"), False: ("falsified", "verified_missing"), None: ("error", "error")}[present]
    return [
        Control(name="target/exists", spec=ProbeSpec(target=target, mode="exists", assertion=a), expect=exists),
        Control(name="target/missing", spec=ProbeSpec(target=target, mode="missing", assertion=a), expect=missing),
    ]


def _present(path: Path) -> bool | None:
    """Whether `path` exists, as the system's stat says; None when the stat fails otherwise."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return None
    return True


def present_needle(data: bytes) -> str | None:
    """A needle known to be in `data`, taken from its bytes so that a binary file offers one too: the
    first run of printable text (up to 32 characters), else the first run of any UTF-8 text. None when
    no byte sequence in `data` is UTF-8 text (an empty file, or bytes that never decode)."""
    text = data.decode("utf-8", errors="surrogateescape")  # an undecodable byte becomes one lone surrogate
    for run in _UNPRINTABLE.split(text):
        if run.strip():
            return run.strip()[:32]
    return next((run[:32] for run in _UNDECODABLE.split(text) if run), None)


def target_controls(target: str, data: bytes) -> list[Control]:
    """The paired run on the probe's own target for content: a random needle checked absent and,
    when `present_needle` finds one, a needle taken from its bytes (known present)."""
    absent = _absent_needle(data)
    a = CONTROL_ASSERTION
    controls = [
        Control(
            name="target/needle absent",
            spec=ProbeSpec(target=target, mode="contains", needle=absent, assertion=a),
            expect="falsified",
            expect_matches=0,
        ),
        Control(
            name="target/negate needle absent",
            spec=ProbeSpec(target=target, mode="contains", needle=absent, negate=True, assertion=a),
            expect="verified_missing",
            expect_matches=0,
        ),
    ]
    present = present_needle(data)
    if present is not None:
        controls += [
            Control(
                name="target/needle present",
                spec=ProbeSpec(target=target, mode="contains", needle=present, assertion=a),
                expect="verified",
                expect_matches=data.count(present.encode()),
            ),
            Control(
                name="target/negate needle present",
                spec=ProbeSpec(target=target, mode="contains", needle=present, negate=True, assertion=a),
                expect="falsified",
            ),
        ]
    return controls


def _absent_needle(data: bytes) -> str:
    while True:
        needle = f"wake-control-{secrets.token_hex(12)}"
        if needle.encode() not in data:
            return needle


@dataclass(frozen=True, kw_only=True)
class SelfTest:
    passed: bool
    controls: list[dict[str, object]]


@dataclass(frozen=True, kw_only=True)
class Instrument:
    """A probe instrument: roots, a size limit, and the evaluation function under test."""

    roots: tuple[Path, ...]
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    evaluate: Evaluate = evaluate

    @classmethod
    def create(cls, roots: Iterable[Path], max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, evaluate_fn: Evaluate = evaluate) -> Instrument:
        return cls(roots=tuple(real_roots(roots)), max_file_bytes=max_file_bytes, evaluate=evaluate_fn)

    def self_test(self) -> SelfTest:
        """Run the dual-needle battery on a fresh fixture: files in a temporary root, a file
        outside it, and a symlink from inside to outside."""
        with tempfile.TemporaryDirectory(prefix="wake-probe-selftest-") as tmp:
            base = Path(os.path.realpath(tmp))
            root, outside = base / "root", base / "outside"
            root.mkdir()
            outside.mkdir()
            (root / "present.txt").write_text(_CONTROL_TEXT, encoding="utf-8")
            (outside / "secret.txt").write_text(_CONTROL_TEXT, encoding="utf-8")
            (root / "link.txt").symlink_to(outside / "secret.txt")
            nonce = _absent_needle(_CONTROL_TEXT.encode())
            # the fixture is tiny: its controls test the evaluation's logic, not the configured size limit
            results = [_run_control(c, [root], self.evaluate, DEFAULT_MAX_FILE_BYTES) for c in fixture_controls(nonce)]
        return SelfTest(passed=all(r["ok"] for r in results), controls=results)

    def probe(self, spec: ProbeSpec) -> ProbeResult:
        """Run the controls, then the probe. A failed control turns any verdict into `error`."""
        test = self.self_test()
        controls = [{**c, "on": "fixture"} for c in test.controls]
        try:
            path = resolve(spec.target, self.roots)
        except Escape as exc:
            return self._result(spec, None, Outcome(verdict="error", evidence=_bare_evidence(spec, None, str(exc))), test.passed, controls)
        target_runs, not_run = self._target_controls(spec, path)
        controls += target_runs
        passed = all(c["ok"] for c in controls)
        try:
            outcome = self.evaluate(path, spec, self.max_file_bytes)
        except Exception as exc:  # the instrument broke: an error, never a verdict
            outcome = Outcome(verdict="error", evidence=_bare_evidence(spec, str(path), f"the instrument raised {exc!r}"))
        if outcome.verdict not in VERDICTS:
            outcome = Outcome(
                verdict="error", evidence=_bare_evidence(spec, str(path), f"the instrument returned an unknown verdict {outcome.verdict!r}")
            )
        if not_run:
            outcome = Outcome(verdict=outcome.verdict, evidence={**outcome.evidence, "controls_not_run": not_run})
        return self._result(spec, str(path), outcome, passed, controls)

    def _target_controls(self, spec: ProbeSpec, path: Path) -> tuple[list[dict[str, object]], str | None]:
        """The paired runs on the probe's own target, judged by what this method reads itself, and
        why the known-present content controls could not run, if they could not."""
        planned = existence_controls(spec.target, _present(path))
        not_run = None
        if spec.mode == "contains":
            try:
                if path.is_file() and path.stat().st_size <= self.max_file_bytes:
                    data = path.read_bytes()
                    planned += target_controls(spec.target, data)
                    if present_needle(data) is None:
                        not_run = ("the known-present needle controls on the target could not run: "
                                   + ("it is empty" if not data else "none of its bytes are UTF-8 text a needle could match"))
            except OSError:
                pass  # the probe itself will report why it cannot read the target
        return [{**_run_control(c, self.roots, self.evaluate, self.max_file_bytes), "on": "target"} for c in planned], not_run

    @staticmethod
    def _result(spec: ProbeSpec, resolved: str | None, outcome: Outcome, passed: bool, controls: list[dict[str, Any]]) -> ProbeResult:
        evidence = dict(outcome.evidence)
        verdict = outcome.verdict
        if not passed:
            failed = [c["name"] for c in controls if not c["ok"]]
            evidence["cause"] = f"the instrument failed its dual-needle controls ({', '.join(failed)}); its verdict {verdict!r} is not trusted"
            evidence["untrusted_verdict"] = verdict
            evidence["untrusted_cause"] = outcome.evidence.get("cause")
            verdict = "error"
        return ProbeResult(
            spec=spec,
            resolved_path=resolved,
            verdict=verdict,
            evidence=evidence,
            instrument_state="passed" if passed else "failed",
            controls=controls,
        )


def _bare_evidence(spec: ProbeSpec, path: str | None, cause: str) -> dict[str, object]:
    return {"path": path, "size_bytes": None, "needle": spec.needle, "match_count": None, "mode": spec.mode, "negate": spec.negate, "cause": cause}


def note(result: ProbeResult) -> str:
    """One line saying what the probe found, from its verdict and evidence."""
    ev = result.evidence
    size = f", {ev['size_bytes']} bytes" if ev.get("size_bytes") is not None else ""
    matches = f", {ev['match_count']} match{'es' if ev['match_count'] != 1 else ''}" if ev.get("match_count") is not None else ""
    cause = f" — {ev['cause']}" if ev.get("cause") else ""
    controls = "controls passed" if result.trusted else "controls FAILED"
    if ev.get("controls_not_run"):
        controls += f" ({ev['controls_not_run']})"
    return f"{result.verdict}{matches}{size}; {controls}{cause}"

