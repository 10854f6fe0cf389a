"""What a command imports: `wake --version`, `wake --help` and `wake ledger` run in a child
interpreter that writes its `sys.modules` at exit, and the heavy parts a command does not use (the
graph driver, Redis (a ledger read is PostgreSQL's alone), the metrics client, MCP, the web
stack, Apprise, the model client, the tool registry, the wake's steps) are not among them. A
count, not a time: the time is bench/cli.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import pooler

# Writes the modules loaded at exit (after the command, however it exits) to argv[1], then runs
# the console script's main() with the remaining arguments.
PROBE = """
import atexit, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
sys.argv = ["wake", *sys.argv[2:]]
from wake.cli.main import main
main()
"""

NEVER_FOR_A_LEDGER_READ = (
    "neo4j", "redis", "prometheus_client", "mcp", "starlette", "uvicorn", "apprise", "httpx", "jinja2", "pygit2", "apscheduler",
    "ledgers.graph", "surfaces.registry", "surfaces.loader", "wake.run", "wake.think", "wake.arrival", "wake.daemon", "wake.console", "memory.repo",
)
NEVER_FOR_THE_VERSION = (*NEVER_FOR_A_LEDGER_READ, "asyncpg", "pydantic", "structlog", "wake.config", "wake.stores", "wake.logs")


def _hermetic_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "XDG_"))}


def _imported(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    out = tmp_path / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        capture_output=True, text=True, timeout=120, env=_hermetic_env(), cwd=tmp_path, stdin=subprocess.DEVNULL,
    )
    return done, set(out.read_text().split("\n"))


def _present(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


def test_the_version_imports_click_and_the_table_alone(tmp_path: Path) -> None:
    done, modules = _imported(tmp_path, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "wake, version 0.1.0"
    assert _present(modules, NEVER_FOR_THE_VERSION) == []
    ours = sorted(m for m in modules if m.split(".")[0] in {"wake", "surfaces", "ledgers", "codecheck", "memory"})
    assert ours == ["ledgers", "ledgers.vocab", "wake", "wake.cli", "wake.cli.app", "wake.cli.commands", "wake.cli.main", "wake.errors"]


def test_the_help_imports_no_command(tmp_path: Path) -> None:
    done, modules = _imported(tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    assert "  ledger " in done.stdout
    assert _present(modules, NEVER_FOR_THE_VERSION) == []
    assert not [m for m in modules if m.startswith("wake.cli.") and m not in {"wake.cli.app", "wake.cli.commands", "wake.cli.main"}]


def test_a_ledger_read_imports_no_graph_mcp_web_or_wake_steps(tmp_path: Path, pg_dsn: str, redis_url: str,
                                                               write_config: Callable[..., Path]) -> None:
    config = write_config(f'state_dir = "{tmp_path / "state"}"\n[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}'
                          f'[redis]\nurl = "{redis_url}"\n'
                          '[agents.demo]\npersona_files = ["persona.md"]\n[agents.demo.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\n')
    done, modules = _imported(tmp_path, "--config", str(config), "ledger")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("STARTED (UTC)"), done.stdout  # the table (of no wakes yet)
    assert "asyncpg" in modules and "wake.cli.wakes" in modules  # it did read the ledger
    assert _present(modules, NEVER_FOR_A_LEDGER_READ) == []


@pytest.mark.parametrize("args", [("ledger", "--help"), ("up", "--help"), ("daemon", "--help")])
def test_a_commands_help_runs_through_the_entry_point(tmp_path: Path, args: tuple[str, ...]) -> None:
    done, modules = _imported(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: wake {args[0]} [OPTIONS]")
    assert _present(modules, ("neo4j", "starlette", "uvicorn")) == []  # even `wake daemon --help` starts nothing


# What `wake daemon` alone runs: the service, its anchor companion (the RFC 3161 client and X.509
# parsing) and its incident watch. `wake status` and `wake trigger` share its module.
THE_DAEMONS_OWN = ("wake.daemon.service", "wake.daemon.anchoring", "wake.daemon.incident_watch", "wake.witness.anchor", "rfc3161_client")


@pytest.mark.parametrize("args", [("status", "--help"), ("trigger", "--help"), ("daemon", "--help")])
def test_status_and_trigger_import_none_of_the_daemons_own_parts(tmp_path: Path, args: tuple[str, ...]) -> None:
    done, modules = _imported(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert "wake.cli.daemon" in modules and "wake.daemon.remote" in modules  # the module they share, and what status reads with
    assert _present(modules, THE_DAEMONS_OWN) == []
