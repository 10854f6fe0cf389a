"""`wake pause`, `wake resume`, `wake at`, `wake outbox` and the operator keys as subprocesses on
real stores: each bad input is one line, `wake: …`, with its documented exit status, and
changes nothing."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.acceptance.test_daemon import query
from tests.support import agents as agent_configs
from tests.support import pooler

CLI = Callable[..., subprocess.CompletedProcess[str]]



def _agents(whisper: str) -> str:
    return agent_configs.toml(tiers={"whisper": f'binds = ["wake.whisper"]\n{whisper}', "surface": 'binds = ["wake.surface"]'})


@pytest.fixture
def config(tmp_path: Path, pg_dsn: str, redis_url: str) -> Callable[..., Path]:
    def write(whisper: str = "", extra: str = "") -> Path:
        path = tmp_path / "wake.toml"
        path.write_text(f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n{extra}\n' + _agents(whisper))
        return path

    return write


def _one_line(result: subprocess.CompletedProcess[str], status: int, words: str) -> None:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if not line.startswith("{")]  # JSON log lines aside
    assert len(lines) == 1 and lines[0].startswith("wake: ") and words in lines[0], result.stderr


@pytest.mark.parametrize(
    ("args", "status", "words"),
    [
        (("pause", "nobody"), 65, "no agent 'nobody' is configured; known: demo"),
        (("pause", "demo", "--tier", "full"), 65, "agent 'demo' has no full tier"),
        (("pause", "demo", "--until", "next tuesday-ish"), 65, "cannot read the time 'next tuesday-ish': expected an ISO 8601 time"),
        (("pause", "demo", "--until", "2001-01-01T00:00"), 65, "which has passed"),
        (("resume", "nobody"), 65, "no agent 'nobody' is configured"),
        (("at", "soonish", "--agent", "demo"), 65, "cannot read the time 'soonish'"),
        (("at", "10m", "--agent", "nobody"), 65, "no agent 'nobody' is configured"),
        (("at",), 65, "give exactly one of: a time WHEN, --list, --cancel ID"),
        (("at", "--cancel", "0000"), 1, "no one-shot matches '0000'"),
        (("outbox", "--retry", "12345"), 1, "no delivery 12345"),
    ],
    ids=["pause_unknown_agent", "pause_unknown_tier", "pause_bad_time", "pause_past", "resume_unknown", "at_bad_time",
         "at_unknown_agent", "at_nothing", "cancel_unknown", "retry_unknown"],
)
def test_bad_input_is_one_line_and_its_exit_status_and_stores_nothing(
    wake_cli: CLI, config: Callable[..., Path], pg_dsn: str, args: tuple[str, ...], status: int, words: str,
) -> None:
    path = config()
    _one_line(wake_cli("--config", str(path), *args), status, words)
    for table in ("wake_pauses", "wake_oneshots", "wake_outbox"):
        assert query(pg_dsn, f"SELECT * FROM {table}") == []


def test_an_unknown_delivery_route_is_a_config_error(wake_cli: CLI, config: Callable[..., Path]) -> None:
    path = config('deliver_to = ["pager"]')
    _one_line(wake_cli("--config", str(path), "up"), 78, "agents.demo.tiers.whisper.deliver_to.0: unknown delivery route 'pager'")


def test_a_missing_instructions_file_and_a_non_executable_precheck(wake_cli: CLI, config: Callable[..., Path], tmp_path: Path) -> None:
    (tmp_path / "check.sh").write_text("#!/bin/sh\nexit 0\n")  # not executable
    path = config(f'instructions_file = "missing.md"\nprecheck = ["{tmp_path / "check.sh"}"]')
    doctor = wake_cli("--config", str(path), "doctor", "--json")
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1
    assert checks["instructions:demo/whisper"]["status"] == "fail" and "missing.md does not exist" in checks["instructions:demo/whisper"]["detail"]
    assert checks["precheck:demo/whisper"]["status"] == "fail" and "is not an executable file" in checks["precheck:demo/whisper"]["detail"]
    up = wake_cli("--config", str(path), "up", "--json")  # the wake runs, and fails on the pre-check with the reason
    outcome = json.loads(up.stdout)
    assert up.returncode == 1 and outcome["status"] == "failed" and "could not run: Permission denied" in outcome["error"]
    blocks = {b["name"]: b for b in outcome["blocks"]}
    assert blocks["instructions"]["retrieval"] == "failed" and "missing.md does not exist" in blocks["instructions"]["reason"]


def test_pause_status_resume_and_one_shots_round_trip(wake_cli: CLI, config: Callable[..., Path], pg_dsn: str) -> None:
    path = config()
    paused = wake_cli("--config", str(path), "pause", "demo", "--tier", "whisper", "--until", "2h", "--reason", "deploy", "--by", "erin")
    assert paused.returncode == 0 and "paused demo/whisper by erin until " in paused.stdout, paused.stderr
    asked = wake_cli("--config", str(path), "at", "2030-01-01T09:00", "--agent", "demo", "--tier", "surface", "--note", "new year")
    assert asked.returncode == 0 and "for demo/surface at 2030-01-01T08:00:00+00:00" in asked.stdout  # local to Europe/Stockholm
    shot = asked.stdout.split()[1]
    status = wake_cli("--config", str(path), "status", "--json")
    snap = json.loads(status.stdout)
    assert [(p["agent_id"], p["tier"], p["paused_by"], p["reason"]) for p in snap["pauses"]] == [("demo", "whisper", "erin", "deploy")]
    assert [str(o["wake_id"]) for o in snap["oneshots"]] == [shot]
    listed = wake_cli("--config", str(path), "at", "--list")
    assert shot in listed.stdout and "pending" in listed.stdout and "new year" in listed.stdout
    cancelled = wake_cli("--config", str(path), "at", "--cancel", shot[:8])
    assert cancelled.returncode == 0 and f"cancelled one-shot {shot}" in cancelled.stdout
    _one_line(wake_cli("--config", str(path), "at", "--cancel", shot), 65, "was already cancelled")
    resumed = wake_cli("--config", str(path), "resume", "demo")
    assert resumed.returncode == 0 and "resumed demo/whisper (paused by erin)" in resumed.stdout
    again = wake_cli("--config", str(path), "resume", "demo")
    assert again.returncode == 0 and "was not paused; nothing changed" in again.stdout
    assert query(pg_dsn, "SELECT * FROM wake_pauses") == []
    everything = wake_cli("--config", str(path), "at", "--list", "--all", "--json")
    assert [o["cancelled_by"] is not None for o in json.loads(everything.stdout)] == [True]


def test_wake_console_refuses_an_address_other_than_loopback_without_a_token(
    wake_cli: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path,
) -> None:
    done = wake_cli("console", "--listen", "0.0.0.0:0", extra_env={"CREDENTIALS_DIRECTORY": str(tmp_path)})
    assert done.returncode == 78, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("wake:")]
    assert lines == ["wake: the console listens on 0.0.0.0:0, which is not loopback: it needs a token "
                     "(credential wake_console_token or $WAKE_CONSOLE_TOKEN)"]
    bad = wake_cli("console", "--listen", "nowhere")
    assert bad.returncode == 78 and "bad console listen address" in bad.stderr
