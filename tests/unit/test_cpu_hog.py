"""The load generator stops by itself: at its time limit, with its command, and when its starter dies."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
HOG = [sys.executable, "-m", "tests.support.cpu_hog"]


def test_it_stops_when_its_time_is_up() -> None:
    done = subprocess.run([*HOG, "--procs", "1", "--seconds", "0.5"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "1 busy loop(s) for at most 0.5 s" in done.stderr and "time is up" in done.stderr


def test_it_runs_a_command_and_exits_with_its_status() -> None:
    command = [sys.executable, "-c", "import sys; sys.exit(3)"]
    done = subprocess.run(
        [*HOG, "--procs", "2", "--seconds", "600", "--", *command], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 3 and "the command ended" in done.stderr


def test_its_loops_end_when_the_process_that_started_it_dies() -> None:
    starter = subprocess.Popen(["bash", "-c", f"{' '.join(HOG)} --procs 2 --seconds 600 & wait"], cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        assert starter.stderr is not None
        started = starter.stderr.readline()  # the hog says so once its loops run
        found = re.search(r"\(pid (\d+)\)", started)
        assert found, started
        hog = psutil.Process(int(found.group(1)))
        loops = hog.children()
        assert len(loops) == 2
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=60)
        gone, alive = psutil.wait_procs([hog, *loops], timeout=60)
        assert not alive and len(gone) == 3
    finally:
        if starter.poll() is None:
            starter.kill()
        starter.wait(timeout=60)
        if starter.stderr is not None:
            starter.stderr.close()
