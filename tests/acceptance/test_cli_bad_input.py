"""Bad input to the CLI: one line on stderr, the documented exit status (docs/commands.md, "Exit statuses"),
no traceback, nothing changed."""

from __future__ import annotations

import json
import socket
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.support.openai_server import ScriptedServer
from wake.config import Config

CLI = Callable[..., subprocess.CompletedProcess[str]]
AGENTS = '[agents.demo]\npersona_files = ["persona.md"]\n[agents.demo.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\n'


def _one_line(done: subprocess.CompletedProcess[str], status: int, *needles: str) -> None:
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith(("wake:", "Error:"))]
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_unknown_ids_bad_bytes_and_bad_values_are_refused_in_one_line(wake_cli: CLI, store_config: Callable[..., Config]) -> None:
    config = store_config(agents=AGENTS)
    cfg = ("--config", str(config.path))
    assert wake_cli(*cfg, "up").returncode == 0
    ghost = str(uuid.uuid4())
    for args in (("show", ghost), ("show", ghost, "--json"), ("show", ghost, "--arrival"), ("verify", ghost), ("diff", ghost, ghost)):
        _one_line(wake_cli(*cfg, *args), 1, "no wake matches")

    # arguments that are not UTF-8 (kept by Python as lone surrogates) are refused before any store
    _one_line(wake_cli(*cfg, "tell", b"caf\xe9"), 65, "argument 4 is not valid UTF-8")
    _one_line(wake_cli(*cfg, "settle", b"s\xff", "ok"), 65, "not valid UTF-8")
    _one_line(wake_cli(*cfg, "tell", "x" * 120_000), 65, "120000 characters; at most 100000")
    _one_line(wake_cli(*cfg, "at", "2020-01-01T10:00"), 65, "which has passed")
    _one_line(wake_cli(*cfg, "at", "99999999d"), 65, "cannot read the time")
    _one_line(wake_cli(*cfg, "ledger", "--status", "nonsense"), 2, "nonsense")
    _one_line(wake_cli(*cfg, "trigger", "--agent", "bob"), 65, "no agent 'bob' is configured; known: demo")
    _one_line(wake_cli(*cfg, "pause", "bob"), 65, "no agent 'bob' is configured; known: demo")
    # an id that cannot be an agent's (the pattern, bounded length) is a usage error, clipped; a
    # well-formed id no agent has is refused input (65), as for every command
    _one_line(wake_cli(*cfg, "tell", "hi", "--agent", "b" * 100_000), 2, "(100000 characters)")

    # nothing of it was stored: no message, no one-shot
    ledger = json.loads(wake_cli(*cfg, "at", "--list", "--all", "--json").stdout)
    assert ledger == []
    # --config after the subcommand names the same file
    after = wake_cli("ledger", "--json", *cfg)
    assert after.returncode == 0 and len(json.loads(after.stdout)) == 1, after.stderr


def test_doctor_imports_the_tools_modules_and_asks_each_model_route(wake_cli: CLI, tmp_path: Path) -> None:
    (tmp_path / "persona.md").write_text("You are a test agent.\n")
    (tmp_path / "broken_tools.py").write_text("raise RuntimeError('this module cannot be imported')\n")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    with ScriptedServer() as server:
        config = tmp_path / "wake.toml"
        config.write_text(f'[models.up]\nbase_url = "{server.url}"\nmodel = "scripted-1"\n[models.down]\nbase_url = "{down}"\nmodel = "m"\n' + AGENTS)
        done = wake_cli("--config", str(config), "doctor", "--json")
        checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
        assert checks["model:up"]["status"] == "ok" and checks["model:down"]["status"] == "fail", checks
        assert checks["tools"]["status"] == "ok" and done.returncode == 1
        broken = tmp_path / "broken.toml"
        broken.write_text(f'[tools]\nmodules = ["broken_tools"]\n[models.up]\nbase_url = "{server.url}"\nmodel = "scripted-1"\n' + AGENTS)
        done = wake_cli("--config", str(broken), "doctor", "--json", extra_env={"PYTHONPATH": str(tmp_path)})
        checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
        assert checks["tools"]["status"] == "fail" and "cannot be imported" in checks["tools"]["detail"], checks["tools"]
        assert done.returncode == 1
