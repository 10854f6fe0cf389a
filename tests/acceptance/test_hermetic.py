"""The suite leaves the user's environment alone: a user's exported WAKE_STATE_DIR (or database,
Redis, XDG homes) is neither read nor written by a test (tests/support/environ.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support import environ as test_environ
from tests.support import pooler

REPO = Path(__file__).resolve().parents[2]
# A test that runs full wakes which write the agent's memory repository under the state directory.
WAKE_TEST = "tests/integration/test_memory_wake.py::test_a_full_wake_writes_memory_through_the_tool_and_the_next_wake_shows_it"


# In the pytest process itself (`-n 0`) and on a parallel worker (`-n 1`), which runs its own session.
@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_wake_under_pytest_leaves_an_exported_state_dir_and_xdg_home_empty(tmp_path: Path, workers: str) -> None:
    canary, xdg = tmp_path / "canary-state", tmp_path / "canary-xdg"
    canary.mkdir()
    xdg.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(
        PYTHONPATH=str(REPO), WAKE_STATE_DIR=str(canary), XDG_STATE_HOME=str(xdg), XDG_CONFIG_HOME=str(xdg),
        WAKE_CONFIG=str(tmp_path / "nowhere.toml"), REDIS_URL="redis://192.0.2.1:1", DATABASE_URL="postgresql://nobody@192.0.2.1:1/x",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "600", "--basetemp", str(tmp_path / "bt"), "-n", workers,
         WAKE_TEST],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout
    assert list(canary.iterdir()) == [] and list(xdg.iterdir()) == []


def test_the_scrub_keeps_the_suites_own_switches_and_removes_what_wake_reads(tmp_path: Path) -> None:
    environ = {
        "WAKE_STATE_DIR": "/home/u/state", "WAKE_CONFIG": "/home/u/wake.toml", "WAKE_LOG__LEVEL": "debug", "WAKE_TEST__X": "1",
        "PGHOST": "db", "PGPASSWORD": "p", "REDIS_URL": "redis://x", "DATABASE_URL": "postgresql://x", "NEO4J_AUTH": "a/b",
        "XDG_STATE_HOME": "/home/u/.local/state", "STATE_DIRECTORY": "/var/lib/wake", "NOTIFY_SOCKET": "/run/x",
        "WAKE_TEST_PG_DSN": "postgresql://t", "WAKE_REQUIRE_NEO4J": "1", "WAKE_LLAMA_CACHE": "/c", "WAKE_CI_VENV": "v", "HOME": "/home/u",
    }
    removed = test_environ.scrub(environ, tmp_path)
    assert set(environ) == {"WAKE_TEST_PG_DSN", "WAKE_REQUIRE_NEO4J", "WAKE_LLAMA_CACHE", "WAKE_CI_VENV", "HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"}
    assert "WAKE_TEST__X" in removed  # a `__` is a config override, whatever its prefix
    assert environ["XDG_STATE_HOME"] == str(tmp_path / "state")
    # the session ran the scrub: only the XDG homes it set are left, under the base temporary directory
    left = {k for k in os.environ if test_environ.READ_BY_WAKE.match(k) and not test_environ.kept(k)}
    routed = {"WAKE_POSTGRES__POOLER"} if pooler.active() else set()  # set after the scrub by the pooler mode (tests.support.pooler)
    assert left == {"XDG_STATE_HOME", "XDG_CONFIG_HOME"} | routed
    assert Path(os.environ["XDG_STATE_HOME"]).parent.parent in tmp_path.parents


def test_the_environments_scripts_come_first_on_path_once() -> None:
    environ = {"PATH": f"/usr/bin{os.pathsep}/venv/bin{os.pathsep}/bin"}
    assert test_environ.scripts_first(environ, "/venv/bin") == "/venv/bin"
    assert environ["PATH"] == os.pathsep.join(["/venv/bin", "/usr/bin", "/bin"])
    test_environ.scripts_first(environ, "/venv/bin")
    assert environ["PATH"] == os.pathsep.join(["/venv/bin", "/usr/bin", "/bin"])
    assert os.environ["PATH"].split(os.pathsep)[0] == sysconfig.get_path("scripts")  # this session's, by pytest_sessionstart
