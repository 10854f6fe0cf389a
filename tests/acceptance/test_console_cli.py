"""`wake console` as the operator runs it (issue 41): on a port another process holds it exits 78
with one line (it used to wait for ever on a start that a failed bind never signals, deaf to
SIGTERM); serving, it ends on SIGTERM with status 0."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from wake.config import Config

CLI = Callable[..., subprocess.CompletedProcess[str]]
AGENTS = '[agents.demo]\n[agents.demo.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\n'


def test_a_taken_port_is_exit_78_in_one_line(wake_cli: CLI, store_config: Callable[..., Config]) -> None:
    config = store_config(agents=AGENTS)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = wake_cli("--config", str(config.path), "console", "--listen", f"127.0.0.1:{port}", timeout=120)
    assert done.returncode == 78, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("wake:")]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], done.stderr[-2000:]


def test_sigterm_ends_a_serving_console_with_status_0(wake_cli: CLI, store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config(agents=AGENTS)
    env = {**wake_cli.env, "WAKE_LOG_FORMAT": "console"}  # type: ignore[attr-defined]
    proc = subprocess.Popen([sys.executable, "-m", "wake", "--config", str(config.path), "console", "--listen", "127.0.0.1:0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    seen = b""
    try:
        deadline = time.monotonic() + 120  # bounded: the embedded PostgreSQL starts first on a loaded machine
        while b"wake console on" not in seen and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                seen += os.read(proc.stderr.fileno(), 65536)
        assert b"wake console on" in seen, seen[-2000:]
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stderr.close()
    assert status == 0, seen[-2000:]
