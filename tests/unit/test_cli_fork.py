"""The tests' CLI fork server (tests/support/cli_fork.py) gives a command what a subprocess would:
the same output and status, its own environment, directory, argv and pid, a fresh random state,
the interpreter's end (threads joined, atexit's handlers run), a signal's status, and a kill when
the timeout passes."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import cli_fork

WAKE = [sys.executable, "-m", "wake"]

# A tools module: what it found at import, written to $PROBE_OUT; then what $PROBE_DO says.
PROBE = """
import atexit, json, os, random, signal, sys, threading
out = os.environ["PROBE_OUT"]
seen = {"pid": os.getpid(), "cwd": os.getcwd(), "argv": sys.argv[1:], "mark": os.environ.get("PROBE_MARK"),
        "random": random.random(), "path0": sys.path[0]}
with open(out, "w") as f:
    json.dump(seen, f)
do = os.environ.get("PROBE_DO", "")
if do == "atexit":
    atexit.register(lambda: open(out + ".atexit", "w").write("ran"))
elif do == "thread":
    def late():
        threading.main_thread().join()  # returns once the interpreter has begun to end, which then joins this thread
        open(out + ".thread", "w").write("joined")
    threading.Thread(target=late).start()
elif do == "term":
    os.kill(os.getpid(), signal.SIGTERM)
elif do == "hang":
    threading.Event().wait()
TOOLS = []
"""


@pytest.fixture(autouse=True)
def _forked(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the fork server: they use it whatever WAKE_TEST_CLI_FORK says."""
    monkeypatch.setenv("WAKE_TEST_CLI_FORK", "1")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "XDG_", "PYTHONPATH"))}
    env.update(WAKE_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(tmp_path), PROBE_OUT=str(tmp_path / "seen.json"), **extra)
    return env


def _config(tmp_path: Path) -> Path:
    (tmp_path / "probe_tools.py").write_text(PROBE)
    config = tmp_path / "wake.toml"
    config.write_text('[tools]\nmodules = ["probe_tools"]\nentry_points = false\n[agents.a.tiers.whisper]\nbinds = ["wake"]\n')
    return config


def _both(cmd: list[str], **kw: object) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    forked = cli_fork.run(cmd, capture_output=True, text=True, timeout=120, **kw)  # type: ignore[arg-type]
    stdin = {} if "input" in kw else {"stdin": subprocess.DEVNULL}
    plain = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **stdin, **kw)  # type: ignore[call-overload]
    return forked, plain


@pytest.mark.parametrize("args", [["--version"], ["nosuch"], ["--config", "/nonexistent/wake.toml", "ledger"], ["ledger", "--limit", "x"]])
def test_a_forked_command_says_what_a_subprocess_says(tmp_path: Path, args: list[str]) -> None:
    forked, plain = _both([*WAKE, *args], env=_env(tmp_path), cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert forked.stdout or forked.stderr


def test_the_child_has_the_commands_environment_directory_argv_pid_and_its_own_random_state(tmp_path: Path) -> None:
    config = _config(tmp_path)
    seen = []
    for mark in ("one", "two"):
        done = cli_fork.run([*WAKE, "--config", str(config), "registry"], env=_env(tmp_path, PROBE_MARK=mark), cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        seen.append(json.loads((tmp_path / "seen.json").read_text()))
    assert [s["mark"] for s in seen] == ["one", "two"]
    assert all(s["cwd"] == str(tmp_path) and s["path0"] == str(tmp_path) for s in seen)
    assert all(s["argv"] == ["--config", str(config), "registry"] for s in seen)
    assert len({seen[0]["pid"], seen[1]["pid"], os.getpid(), cli_fork._server().proc.pid}) == 4
    assert seen[0]["random"] != seen[1]["random"]


@pytest.mark.parametrize(("do", "left"), [("atexit", "seen.json.atexit"), ("thread", "seen.json.thread")])
def test_the_child_ends_as_the_interpreter_does(tmp_path: Path, do: str, left: str) -> None:
    done = cli_fork.run([*WAKE, "--config", str(_config(tmp_path)), "registry"], env=_env(tmp_path, PROBE_DO=do), cwd=tmp_path,
                        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / left).is_file()


def test_a_signal_is_the_negative_status_as_for_a_subprocess(tmp_path: Path) -> None:
    forked, plain = _both([*WAKE, "--config", str(_config(tmp_path)), "registry"], env=_env(tmp_path, PROBE_DO="term"), cwd=tmp_path)
    assert forked.returncode == plain.returncode == -15


def test_past_its_timeout_the_child_is_killed(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        cli_fork.run([*WAKE, "--config", str(_config(tmp_path)), "registry"], env=_env(tmp_path, PROBE_DO="hang"), cwd=tmp_path,
                     capture_output=True, text=True, timeout=3)
    pid = json.loads((tmp_path / "seen.json").read_text())["pid"]
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # killed and already reaped by the server
    try:
        assert select.select([pidfd], [], [], 30)[0], f"pid {pid} still runs 30 s after its timeout"  # readable once it has ended
    finally:
        os.close(pidfd)


def test_input_reaches_the_childs_stdin(tmp_path: Path) -> None:
    line = json.dumps({"event": "wake.settled", "level": "info", "timestamp": "2026-01-01T00:00:00Z", "agent": "a"})
    forked, plain = _both([*WAKE, "logs", "--color", "never"], env=_env(tmp_path), cwd=tmp_path, input=line + "\n")
    assert forked.returncode == plain.returncode == 0 and forked.stdout == plain.stdout and "wake.settled" in forked.stdout


def test_a_started_child_runs_until_signalled_and_reports_as_popen_does(tmp_path: Path) -> None:
    """`cli_fork.popen` (the daemon replicas'): running until signalled, then the status a plain
    `subprocess.Popen` of the same command reports for the same signal."""
    followed = tmp_path / "log.jsonl"
    followed.write_text(json.dumps({"event": "one", "level": "info", "timestamp": "2026-01-01T00:00:00Z"}) + "\n")
    statuses = []
    for forked in (True, False):
        out = tmp_path / f"out-{forked}.txt"
        with out.open("w") as f:
            cmd = [*WAKE, "logs", "--follow", "--color", "never", str(followed)]
            proc = cli_fork.popen(cmd, stdout=f.fileno(), env=_env(tmp_path), cwd=tmp_path) if forked else subprocess.Popen(
                cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(tmp_path), cwd=tmp_path)
            assert isinstance(proc, cli_fork.Forked) == forked
            reached = select.poll()
            deadline = 600  # 0.1 s rounds: the first line printed, waited on the file growing, bounded
            while "one" not in out.read_text() and deadline:
                assert proc.poll() is None
                reached.poll(100)
                deadline -= 1
            assert "one" in out.read_text()
            proc.send_signal(signal.SIGTERM)
            statuses.append(proc.wait(30))
    assert statuses[0] == statuses[1], statuses
