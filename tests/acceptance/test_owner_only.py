"""Owner-only state: what `wake` leaves under its state directory is readable by its user alone,
the embedded PostgreSQL accepts no other local user, and `wake doctor` warns when something there
is readable by others."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

CLI = Callable[..., subprocess.CompletedProcess[str]]
AGENT = '[agents.demo]\npersona_files = ["persona.md"]\n[agents.demo.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\n'


def _open_to_others(state: Path) -> list[str]:
    found = []
    uid = os.geteuid()
    for root, dirs, files in os.walk(state):
        for path in [Path(root), *(Path(root) / f for f in files)]:
            st = path.lstat()
            if st.st_uid != uid or stat.S_ISLNK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                continue
            allowed = 0o011 if path == state and uid == 0 else 0  # root: pgserver's user traverses to its data
            if st.st_mode & 0o077 & ~allowed:
                found.append(f"{path} {oct(st.st_mode & 0o777)}")
        dirs[:] = [d for d in dirs if (Path(root) / d).lstat().st_uid == uid]
    return found


def _state_check(wake_cli: CLI, config: Path) -> dict[str, str]:
    doctor = json.loads(wake_cli("--config", str(config), "doctor", "--json").stdout)
    checks = doctor["checks"] if isinstance(doctor, dict) else doctor
    [check] = [c for c in checks if c["check"] == "state_dir"]
    return dict(check)


def test_a_wake_leaves_its_state_owner_only_and_doctor_warns_when_it_is_not(wake_cli: CLI, tmp_path: Path) -> None:
    (tmp_path / "persona.md").write_text("You are a test agent.\n")
    config = tmp_path / "wake.toml"
    config.write_text(AGENT)
    up = wake_cli("--config", str(config), "up")
    assert up.returncode == 0, up.stderr
    state = tmp_path / "state"
    assert (state / "memory" / "demo").is_dir() and (state / "redis").is_dir()
    assert _open_to_others(state) == []
    hba = (state / "postgres" / "pg_hba.conf").read_text()
    assert "trust" not in hba and "local all all peer map=wake" in hba

    check = _state_check(wake_cli, config)
    assert check["status"] == "ok", check
    journal = next((state / "memory" / "demo").rglob("*.md"))
    journal.chmod(0o644)
    check = _state_check(wake_cli, config)
    assert check["status"] == "warn" and str(journal) in check["detail"], check


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another OS user needs root to become one")
def test_another_local_user_cannot_connect_to_the_embedded_postgres(wake_cli: CLI, tmp_path: Path) -> None:
    (tmp_path / "persona.md").write_text("You are a test agent.\n")
    config = tmp_path / "wake.toml"
    config.write_text(AGENT)
    wake_cli("--config", str(config), "up", extra_env={"WAKE_ENGINES__IDLE_S": "600"})
    try:
        pwd.getpwnam("nobody")
        import pgserver._commands as commands  # noqa: PLC0415 - the engine's own psql

        # where the server listens, from its own postmaster.pid (line 5): pgserver moves the socket
        # out of the data directory when that path is too long for a unix socket's name
        socket_dir = (tmp_path / "state" / "postgres" / "postmaster.pid").read_text().splitlines()[4]
        done = subprocess.run(
            [str(commands.POSTGRES_BIN_PATH / "psql"), f"postgresql://postgres@/postgres?host={socket_dir}", "-c", "SELECT 1"],
            user="nobody", capture_output=True, text=True, cwd="/", timeout=60,
        )
        assert done.returncode != 0 and ("Permission denied" in done.stderr or "authentication failed" in done.stderr), done.stderr
    finally:
        wake_cli("--config", str(config), "engines", "stop", "--force")
