"""Issue 42's smaller items: `wake doctor` says what the state directory's mode is (0711 as root
is not "owner only"), and `.ci/run` leaves the Go module proxy to Go's own default."""

from __future__ import annotations

from pathlib import Path

from wake.cli import doctor

REPO = Path(__file__).resolve().parents[2]


def test_doctor_says_the_state_directorys_mode_as_it_is(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o711)  # what wake leaves as root, so that pgserver's user reaches its data
    traversable = doctor.state_dir_check(state)
    assert traversable.status == "ok" and "0711" in traversable.detail and "owner only" not in traversable.detail
    assert "not list it" in traversable.detail
    state.chmod(0o700)
    assert doctor.state_dir_check(state).detail.endswith("(mode 0700: owner only)")


def test_ci_names_no_go_module_proxy() -> None:
    text = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "GOPROXY" not in text and "proxy.golang" not in text
