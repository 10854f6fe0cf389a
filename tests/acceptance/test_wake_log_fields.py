"""Every log line of a wake carries its `agent`, `tier` and `wake_id` (docs/configuration.md, "Logs"), the lines
of its sources and of the model client's retries too."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.openai_server import Response, ScriptedServer, completion

CLI = Callable[..., subprocess.CompletedProcess[str]]


def test_arrival_and_retry_lines_name_the_wake(wake_cli: CLI, tmp_path: Path) -> None:
    with ScriptedServer() as server:
        server.push(Response(status=503, body={"error": "busy"}, headers={"Retry-After": "0"}), completion("All calm."))
        config = tmp_path / "wake.toml"
        config.write_text(
            f'[models.scripted]\nbase_url = "{server.url}"\nmodel = "scripted-1"\nretry_cap_s = 0.1\n'
            '[agents.demo.tiers.surface]\nbinds = ["wake.whisper"]\nmodel = "scripted"\n'
        )
        up = wake_cli("--config", str(config), "up", "--tier", "surface")
    assert up.returncode == 0, up.stderr
    wake_id = up.stdout.splitlines()[0].removeprefix("wake ")
    lines = [json.loads(line) for line in up.stderr.splitlines() if line.startswith("{")]
    events = {e["event"] for e in lines}
    assert {"arrival.block", "model.retry", "model.turn", "wake.settled"} <= events, events
    of_wake = [e for e in lines if e["event"].startswith(("arrival.", "model.", "bind.", "manifest.", "wake.started", "wake.settled"))]
    unnamed = [e["event"] for e in of_wake if (e.get("agent"), e.get("tier"), e.get("wake_id")) != ("demo", "surface", wake_id)]
    assert not unnamed, unnamed
