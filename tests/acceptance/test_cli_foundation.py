"""The CLI as a subprocess on the embedded default, in an empty state directory."""

from __future__ import annotations

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
    for command in commands:
        done = wake_cli(command, "--help")
        assert done.returncode == 0 and "Usage:" in done.stdout, command
