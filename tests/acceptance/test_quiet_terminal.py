"""A quiet terminal (issue 42): on a terminal a one-shot command logs at warning and above, so
`wake up` prints its summary once instead of after twenty info lines that repeat it; `-v` shows
them; a pipe still gets every line as JSON."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import cli_fork

pytestmark = pytest.mark.acceptance

WAIT_S = 180.0


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run `python -m wake ARGS` with stdout and stderr on a pseudo-terminal; all it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "wake", *args], env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's end is closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(timeout=WAIT_S)
    assert proc.returncode == 0, out.decode(errors="replace")[-3000:]
    return out.decode(errors="replace")


def test_wake_up_on_a_terminal_prints_its_summary_once_and_info_logs_only_with_v(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env.update(WAKE_STATE_DIR=str(tmp_path / "state"), WAKE_ENGINES__IDLE_S="60")
    try:
        quiet = _on_a_terminal(["up"], env)
        assert quiet.count("manifest root") == 1, quiet
        assert "wake.settled" not in quiet and "bind.done" not in quiet, quiet
        loud = _on_a_terminal(["-v", "up"], env)
        assert "wake.settled" in loud and "bind.done" in loud, loud
        piped = cli_fork.run([sys.executable, "-m", "wake", "up"], env=env, capture_output=True, text=True, timeout=WAIT_S)
        assert piped.returncode == 0 and '"event": "wake.settled"' in piped.stderr, piped.stderr[-2000:]
    finally:
        cli_fork.run([sys.executable, "-m", "wake", "engines", "stop"], env=env, capture_output=True, timeout=WAIT_S, check=False)
