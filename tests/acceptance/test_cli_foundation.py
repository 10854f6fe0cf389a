"""The CLI as a subprocess on the embedded default, in an empty state directory."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from ledgers import schema

CLI = Callable[..., subprocess.CompletedProcess[str]]


def _engines_running(state: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(state) in cmdline and ("postgres" in cmdline or "redis-server" in cmdline):
            found.append(proc)
    return found


def test_doctor_on_embedded_default_in_empty_state_dir(wake_cli: CLI, tmp_path: Path) -> None:
    done = wake_cli("doctor", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    checks = {c["check"]: c for c in report["checks"]}
    assert report["healthy"] is True
    assert checks["postgres"]["status"] == "ok" and checks["postgres"]["latency_ms"] > 0
    assert "embedded" in checks["postgres"]["detail"]
    assert checks["redis"]["status"] == "ok" and checks["redis"]["latency_ms"] > 0
    assert checks["neo4j"]["status"] == "disabled"
    assert checks["schema"]["status"] == "warn"  # nothing migrated yet in a brand-new state dir
    assert checks["python"]["detail"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}")
    table = wake_cli("doctor")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == ["CHECK", "STATUS", "LATENCY", "DETAIL"]
    # the last process out stops the embedded engines
    deadline = time.monotonic() + 10
    while _engines_running(tmp_path / "state") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _engines_running(tmp_path / "state") == []


def test_concurrent_cli_processes_share_the_engines_and_migrate_once(wake_cli: CLI, tmp_path: Path) -> None:
    env = wake_cli.env  # type: ignore[attr-defined]
    procs = [
        subprocess.Popen([sys.executable, "-m", "wake", "migrate"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1] for o in outs]
    applied = [line for out, _ in outs for line in out.splitlines() if line.startswith("applied ")]
    known = schema.available()
    assert sorted(applied) == [f"applied {m.version:04d}_{m.name}" for m in known]  # each file once, by one process
    status = wake_cli("migrate", "--status", "--json")
    assert status.returncode == 0
    assert [s["version"] for s in json.loads(status.stdout) if s["applied_at"]] == [m.version for m in known]
    doctor = wake_cli("doctor", "--json")
    assert {c["check"]: c["status"] for c in json.loads(doctor.stdout)["checks"]}["schema"] == "ok"


def test_unreachable_store_is_one_line_without_traceback(wake_cli: CLI) -> None:
    done = wake_cli("migrate", extra_env={"DATABASE_URL": "postgresql://wake:pw-xyz-123@127.0.0.1:1/wake", "WAKE_POSTGRES__CONNECT_TIMEOUT_S": "2"})
    assert done.returncode == 69
    assert done.stderr.strip().splitlines() == [line for line in done.stderr.strip().splitlines() if line.startswith("wake: ")][-1:]
    assert "wake: postgres unreachable at postgresql://wake:***@127.0.0.1:1/wake:" in done.stderr
    assert "Traceback" not in done.stderr and "pw-xyz-123" not in done.stderr
    doctor = wake_cli("doctor", extra_env={"DATABASE_URL": "postgresql://wake@127.0.0.1:1/wake", "WAKE_POSTGRES__CONNECT_TIMEOUT_S": "2"})
    assert doctor.returncode == 1
    assert [line.split()[:2] for line in doctor.stdout.splitlines() if line.startswith("postgres")] == [["postgres", "fail"]]


def test_every_command_has_help(wake_cli: CLI) -> None:
    top = wake_cli("--help")
    assert top.returncode == 0
    commands = [line.split()[0] for line in top.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert {"doctor", "migrate"} <= set(commands)
    # each in its own process, three at a time: an import that only works after another command's
    # would fail here, and the 33 interpreters fill the cores a second worker leaves idle
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        helped = dict(zip(commands, pool.map(lambda command: wake_cli(command, "--help"), commands), strict=True))
    for command, done in helped.items():
        assert done.returncode == 0 and "Usage:" in done.stdout, (command, done.stderr[-500:])


def _pids_of(procs: list[psutil.Process]) -> set[int]:
    return {p.pid for p in procs}


def _wait_until(predicate: Callable[[], bool], timeout_s: float = 90) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_engines_linger_for_the_next_command_and_wake_engines_stop_stops_them(wake_cli: CLI, tmp_path: Path) -> None:
    state = tmp_path / "state"
    linger = {"WAKE_ENGINES__IDLE_S": "600"}
    try:
        assert wake_cli("doctor", "--json", extra_env=linger).returncode == 0
        first = _engines_running(state)
        assert first, "the engines stopped with the last command although engines.idle_s is 600"
        assert wake_cli("doctor", "--json", extra_env=linger).returncode == 0
        postmasters = {p.pid for p in first if "postgres" in " ".join(p.cmdline())}
        assert postmasters <= _pids_of(_engines_running(state))  # the same engines: nothing restarted
        stopped = wake_cli("engines", "stop", extra_env=linger)
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.strip() == "stopped postgres, redis"
        assert _engines_running(state) == []
        assert wake_cli("engines", "stop", extra_env=linger).stdout.strip() == "no embedded engine was running"
    finally:
        wake_cli("engines", "stop", "--force")


def test_the_reaper_stops_lingering_engines_after_their_user_was_killed(wake_cli: CLI, tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**wake_cli.env, "WAKE_ENGINES__IDLE_S": "2"}  # type: ignore[attr-defined]
    daemon = subprocess.Popen([sys.executable, "-m", "wake", "daemon"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert daemon.stdout is not None
        for line in daemon.stdout:  # the daemon is up once it says so
            if '"daemon.ready"' in line:
                break
        else:
            raise AssertionError(f"the daemon exited with {daemon.wait()} before it was ready")
        assert _engines_running(state)
        busy = wake_cli("engines", "stop", extra_env={"WAKE_ENGINES__IDLE_S": "2"})
        assert busy.returncode == 75 and f"in use by pid {daemon.pid}" in busy.stderr  # a live user keeps them
        daemon.kill()  # SIGKILL: it never deregisters
        daemon.wait(timeout=30)
        # The dead pid stays in the engines' handle lists; the reaper counts only live ones.
        assert _wait_until(lambda: _engines_running(state) == []), [p.cmdline() for p in _engines_running(state)]
    finally:
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait(timeout=30)
        if daemon.stdout is not None:
            daemon.stdout.close()
        wake_cli("engines", "stop", "--force")
