"""`wake doctor --expect AGENT[:TIER]=DURATION` as a subprocess on real stores (docs/incidents.md):
exit 1 with one line per overdue tier (never settled, or settled longer ago than DURATION), exit 0
and nothing printed when every tier named settled within it; a malformed expectation is one usage
line (exit 2), an agent or tier the config does not have one line and exit 65."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import agents as agent_configs
from tests.support import pooler

CLI = Callable[..., subprocess.CompletedProcess[str]]

AGENTS = agent_configs.toml(tiers={"whisper": agent_configs.whisper("1h"), "surface": 'binds = ["wake.surface"]\nevery = "1h"'}, timezone="UTC")


@pytest.fixture
def config(tmp_path: Path, pg_dsn: str, redis_url: str) -> Path:
    path = tmp_path / "wake.toml"
    path.write_text(f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n' + AGENTS)
    return path


def _stdout_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return result.stdout.splitlines()


def _one_line(result: subprocess.CompletedProcess[str], status: int, words: str) -> None:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if not line.startswith("{") and line.strip()]
    assert any(words in line for line in lines), result.stderr
    if status != 2:  # click's usage error adds its usage lines; the error itself is one line
        assert len(lines) == 1 and lines[0].startswith("wake: "), result.stderr


def test_expect_exits_1_with_one_line_per_overdue_tier_and_0_silently_when_none(wake_cli: CLI, config: Path) -> None:
    never = wake_cli("--config", str(config), "doctor", "--expect", "demo=1h")
    assert never.returncode == 1, never.stderr
    assert _stdout_lines(never) == ["overdue: demo/whisper has never settled (expected within 1h 0m)",
                                    "overdue: demo/surface has never settled (expected within 1h 0m)"]
    up = wake_cli("--config", str(config), "up", "--tier", "whisper")
    assert up.returncode == 0, up.stderr
    fresh = wake_cli("--config", str(config), "doctor", "--expect", "demo:whisper=1h")
    assert (fresh.returncode, fresh.stdout) == (0, ""), fresh.stderr
    surface = wake_cli("--config", str(config), "doctor", "--expect", "demo:whisper=1h", "--expect", "demo:surface=1h", "--json")
    assert surface.returncode == 1 and json.loads(surface.stdout) == {"overdue": ["overdue: demo/surface has never settled (expected within 1h 0m)"]}
    # the whisper's row ages past a one-second expectation (polled, bounded: each run is a process start)
    deadline = time.monotonic() + 60
    while True:
        late = wake_cli("--config", str(config), "doctor", "--expect", "demo:whisper=1s")
        if late.returncode == 1 or time.monotonic() > deadline:
            break
    assert late.returncode == 1, late.stderr
    [line] = _stdout_lines(late)
    assert line.startswith("overdue: demo/whisper last settled ") and line.endswith("expected within 0m 1s)")


@pytest.mark.parametrize(
    ("expect", "status", "words"),
    [
        ("demo", 2, "expected AGENT[:TIER]=DURATION"),
        ("demo=0s", 2, "expected a positive duration"),
        ("demo=soon", 2, "expected a duration like"),
        ("demo:deep=1h", 2, "expected a tier (whisper, surface, full)"),
        ("no body=1h", 2, "expected an agent id"),
        ("nobody=1h", 65, "--expect: no agent 'nobody' is configured; known: demo"),
        ("demo:full=1h", 65, "--expect: agent 'demo' has no full tier"),
    ],
    ids=["no_duration", "zero", "bad_duration", "bad_tier", "bad_agent_id", "unknown_agent", "unknown_tier"],
)
def test_a_bad_expectation_is_one_line_and_its_exit_status(wake_cli: CLI, config: Path, expect: str, status: int, words: str) -> None:
    _one_line(wake_cli("--config", str(config), "doctor", "--expect", expect), status, words)


def test_more_than_a_hundred_expectations_are_refused(wake_cli: CLI, config: Path) -> None:
    args = [a for _ in range(101) for a in ("--expect", "demo=1h")]
    _one_line(wake_cli("--config", str(config), "doctor", *args), 2, "at most 100 --expect options, got 101")
