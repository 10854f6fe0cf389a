"""`wake status --watch` on a real terminal: the view in tmux, redrawn in place as the status
changes, marked stale when a fetch fails, and ended by Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0
# The view, fed from a file that the test rewrites: what it shows is what the file says.
PROGRAM = """
import asyncio, json, sys
from wake.observe import watch

async def fetch():
    with open(sys.argv[1]) as f:
        return json.load(f)

asyncio.run(watch.watch(fetch, 0.1))
"""

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed; this test drives a real terminal with it")


def snapshot(agent: str, pending: int) -> dict[str, Any]:
    return {
        "at": "2026-07-16T09:30:00+00:00", "redis": "unix:///run/wake/redis.sock", "daemon_alive": True,
        "replicas": [{"replica_id": "box:4242:ab12", "host": "box", "pid": 4242, "version": "0.1.0",
                      "started_at": "2026-07-16T06:30:00+00:00", "heartbeat_at": "2026-07-16T09:29:58+00:00"}],
        "running": [], "leases": [{"agent": agent, "held": False, "holder": None, "ttl_s": None, "fence": 1}],
        "next_fires": [{"agent": agent, "tier": "whisper", "at": "2026-07-16T09:45:00+00:00"}],
        "pending_requests": pending, "recent": [],
    }


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Callable[..., list[str]]]:
    """A private tmux server (its own socket) running the view on a 140x40 terminal."""
    socket_name = f"pt-observe-{os.getpid()}"

    def tmux(*args: str) -> list[str]:
        done = subprocess.run(["tmux", "-L", socket_name, "-f", os.devnull, *args], check=False, capture_output=True, text=True, timeout=WAIT_S)
        return [str(done.returncode), *done.stdout.splitlines()]

    path = tmp_path / "snapshot.json"
    write(path, snapshot("alpha", 7))
    command = f"PYTHONPATH={REPO} {sys.executable} -c '{PROGRAM}' {path}"
    assert tmux("new-session", "-d", "-s", "watch", "-x", "140", "-y", "40", command)[0] == "0"
    tmux.path = path  # type: ignore[attr-defined]
    yield tmux
    tmux("kill-server")


def write(path: Path, value: Any) -> None:
    fresh = path.with_suffix(".new")
    fresh.write_text(value if isinstance(value, str) else json.dumps(value))
    fresh.replace(path)  # whole, never half written


def screen_when(tmux: Callable[..., list[str]], condition: Callable[[str], bool]) -> str:
    deadline = time.monotonic() + WAIT_S
    screen = ""
    while time.monotonic() < deadline:
        screen = "\n".join(tmux("capture-pane", "-p", "-t", "watch")[1:])
        if condition(screen):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"the screen never met the condition; it shows:\n{screen}")


def test_the_view_is_redrawn_in_place_as_the_status_changes(terminal: Callable[..., list[str]]) -> None:
    path: Path = terminal.path  # type: ignore[attr-defined]
    first = screen_when(terminal, lambda s: "trigger requests waiting: 7" in s)
    assert "alpha" in first and "box:4242:ab12" in first
    write(path, snapshot("beta", 3))
    second = screen_when(terminal, lambda s: "trigger requests waiting: 3" in s)
    assert "beta" in second and "alpha" not in second
    assert second.count("wake status") == 1  # redrawn over the old view, not printed below it
    write(path, "{ not json")
    stale = screen_when(terminal, lambda s: "stale: could not refresh" in s)
    assert "JSONDecodeError" in stale and "beta" in stale  # the last good view stays
    write(path, snapshot("gamma", 0))
    assert "stale" not in screen_when(terminal, lambda s: "gamma" in s)
    terminal("send-keys", "-t", "watch", "C-c")
    deadline = time.monotonic() + WAIT_S
    while terminal("has-session", "-t", "watch")[0] == "0":  # Ctrl-C ends the program, and with it the session
        assert time.monotonic() < deadline, "Ctrl-C did not end the view"
        time.sleep(0.1)
