from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import cli_fork


@pytest.fixture
def wake_cli(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `python -m wake ...` as a subprocess with its own empty state directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env["WAKE_STATE_DIR"] = str(tmp_path / "state")
    env["WAKE_LOG_FORMAT"] = "json"
    # The last command out stops the embedded engines (the old contract): nothing outlives a test.
    # A test of the lingering engines sets its own idle time.
    env["WAKE_ENGINES__IDLE_S"] = "0"
    if "WAKE_POSTGRES__POOLER" in os.environ:  # the session runs through a pooler (tests/support/pooler.py)
        env["WAKE_POSTGRES__POOLER"] = os.environ["WAKE_POSTGRES__POOLER"]

    def run(*args: str, timeout: float = 120, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return cli_fork.run(
            [sys.executable, "-m", "wake", *args],
            capture_output=True, text=True, timeout=timeout, env={**env, **(extra_env or {})}, stdin=subprocess.DEVNULL,
        )

    run.env = env  # type: ignore[attr-defined]
    return run
