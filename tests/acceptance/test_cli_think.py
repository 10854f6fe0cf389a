"""`wake up` with a model route (the scripted server on loopback), then `wake show` and `wake ledger`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support import marked
from tests.support.openai_server import ScriptedServer, completion

CLI = Callable[..., subprocess.CompletedProcess[str]]


def test_wake_up_thinks_and_show_reads_every_thinking_column(wake_cli: CLI, tmp_path: Path) -> None:
    (tmp_path / "persona.md").write_text("You are a careful agent.\n")
    with ScriptedServer() as server:
        server.push(completion(None, [("local_time", {})]), completion("Daybook: checked the time, all calm.", cost=0.00042))
        config = tmp_path / "wake.toml"
        config.write_text(
            f'[models.scripted]\nbase_url = "{server.url}"\nmodel = "scripted-1"\n'
            '[agents.demo]\npersona_files = ["persona.md"]\n'
            '[agents.demo.tiers.surface]\nbinds = ["wake.whisper", "wake.surface"]\nmodel = "scripted"\n'
        )
        up = wake_cli("--config", str(config), "up", "--tier", "surface")
    assert up.returncode == 0, up.stderr
    assert "model scripted-1: 2 turns, 1 tool call (0 refused)" in up.stdout and "$0.000420, stopped: done" in up.stdout
    assert "daybook entry:\n  Daybook: checked the time, all calm." in up.stdout
    events = [json.loads(line)["event"] for line in up.stderr.splitlines() if line.startswith("{")]
    assert events.count("model.turn") == 2 and "tool.call" in events
    wake_id = up.stdout.splitlines()[0].removeprefix("wake ")
    shown = json.loads(wake_cli("--config", str(config), "show", wake_id, "--json").stdout)
    assert (shown["model"], shown["turns"], shown["tool_calls"], shown["refusals"], shown["stop_reason"]) == ("scripted-1", 2, 1, 0, "done")
    assert shown["final_text"] == "Daybook: checked the time, all calm." and shown["cost_usd"] == 0.00042  # a JSON number
    assert shown["prompt_tokens"] > 0 and shown["completion_tokens"] > 0 and shown["escalation_cause"] is None
    text = marked.plain(wake_cli("--config", str(config), "show", wake_id).stdout)  # the final text is marked data
    for line in ("model: scripted-1", "stop_reason: done", "final_text: Daybook: checked the time, all calm.", "cached_tokens: "):
        assert line in text
    assert "None" not in text and "escalation_cause: -\n" in text and "[" not in text.split("tool_hashes:")[0]  # no Python reprs
    listed = [line.split()[0] for line in text.split("blocks (in arrival order):\n", 1)[1].splitlines() if line.startswith("  ")]
    assert listed == shown["arrival_order"] and len(listed) == len(shown["blocks"])  # the prompt's order, not the dict's
    ledger = wake_cli("--config", str(config), "ledger").stdout.splitlines()
    assert "COST" in ledger[0].split() and "$0.0004" in ledger[1]
