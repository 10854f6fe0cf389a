"""`wake up`, `show`, `ledger`, `diff`, `verify` as subprocesses on the embedded default."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from surfaces import loader
from wake.think import prompt

CLI = Callable[..., subprocess.CompletedProcess[str]]


def test_wake_up_then_inspect_it(wake_cli: CLI, tmp_path: Path) -> None:
    dry = wake_cli("up", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "=== arrival prompt ===" in dry.stdout and "## identity" in dry.stdout and "=== manifest ===" in dry.stdout
    # the prompt as sent: the system message with the harness's preamble, the user message ending in the instruction
    sent = dry.stdout.split("=== arrival prompt ===\n", 1)[1].split("\n\n=== manifest ===", 1)[0]
    assert sent.startswith(f"--- system ---\n{prompt.PREAMBLE}") and "\n--- user ---\n" in sent and sent.endswith(prompt.INSTRUCTION)
    assert dry.stdout.rstrip().endswith("\ndry run: nothing recorded")  # and says so
    assert json.loads(wake_cli("ledger", "--json").stdout) == []  # a dry run records nothing

    first = wake_cli("up", "--agent", "demo", "--tier", "whisper")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    wake_id = lines[0].removeprefix("wake ")
    assert len(wake_id) == 36
    assert lines[2].startswith("manifest root ") and len(lines[2].split()[-1]) == 64
    base = loader.build(entry_points=False)
    whisper = [t.name for t in base.binding(["wake.whisper"])]
    surface_added = sorted({t.name for t in base.binding(["wake.whisper", "wake.surface"])} - set(whisper))
    assert "wake_history" in surface_added
    assert "local_time" in whisper and "wake_manifest" in whisper
    assert lines[3].startswith(f"tools bound ({len(whisper)}): {', '.join(whisper)}")
    assert any(line.strip().startswith("identity") and " ok " in line and " ms" in line for line in lines)
    assert "diff vs previous agent wake: first wake" in first.stdout
    events = [json.loads(line)["event"] for line in first.stderr.splitlines() if line.startswith("{")]
    for event in ("wake.started", "bind.done", "arrival.block", "manifest.recorded", "wake.settled"):
        assert event in events

    second = wake_cli("up", "--tier", "surface", "--json")
    outcome = json.loads(second.stdout)
    assert outcome["diff"]["agent"]["tools"]["added"] == surface_added

    ledger = wake_cli("ledger")
    assert ledger.stdout.splitlines()[0].split()[:3] == ["STARTED", "(UTC)", "AGENT"]
    assert len(ledger.stdout.splitlines()) == 3
    only_surface = json.loads(wake_cli("ledger", "--tier", "surface", "--json").stdout)
    assert [r["tier"] for r in only_surface] == ["surface"]

    shown = json.loads(wake_cli("show", wake_id[:8], "--json").stdout)
    assert shown["wake_id"] == wake_id and shown["status"] == "completed" and shown["active_tools_count"] == len(whisper)

    within = wake_cli("diff")  # within the newest wake's tier: one surface wake is not two
    assert within.returncode == 1 and "has fewer than two recorded wakes of its newest wake's tier" in within.stderr
    diffed = wake_cli("diff", "--across-tiers")
    assert diffed.returncode == 0 and f"added={','.join(surface_added)}" in diffed.stdout
    assert wake_cli("up", "--tier", "whisper").returncode == 0
    whispers = wake_cli("diff")  # whisper against whisper, the surface wake between them aside
    assert whispers.returncode == 0 and "tools +0 -0 ~0" in whispers.stdout and whispers.stdout.count("(whisper)") == 2, whispers.stdout
    against = wake_cli("diff", wake_id[:8], "--json")  # one id: against the newest of its own tier
    assert json.loads(against.stdout)["tools"]["added"] == []
    one_surface = wake_cli("diff", "--tier", "surface")
    assert one_surface.returncode == 1 and "fewer than two recorded wakes of tier surface" in one_surface.stderr

    verified = wake_cli("verify", wake_id, "--live")
    assert verified.returncode == 0, verified.stderr
    assert "OK" in verified.stdout.splitlines()[1]
    assert "tools that differ now: none" in verified.stdout

    missing = wake_cli("show", "ffffffff")
    assert missing.returncode == 1 and missing.stderr.strip().endswith("no wake matches 'ffffffff' (give a full id or a unique prefix)")


def test_malformed_tool_module_stops_startup(wake_cli: CLI, tmp_path: Path) -> None:
    (tmp_path / "badtools.py").write_text(
        "from surfaces.registry import Tool\n"
        "async def h(ctx): return None\n"
        "TOOLS = [Tool(name='broken', description='', parameters={'type': 'object'}, version='1', handler=h, mutates=False, "
        "surfaces=frozenset({'wake'}))]\n"
    )
    config = tmp_path / "wake.toml"
    config.write_text('[tools]\nmodules = ["badtools"]\n[agents.a.tiers.whisper]\nbinds = ["wake"]\n')
    done = wake_cli("--config", str(config), "up", extra_env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 70
    assert done.stderr.strip().splitlines()[-1] == "wake: tool registry: tool 'broken' (module badtools): empty description"
