"""One daemon wake end to end against a real model: `wake daemon` as a process, a tier pointed at
the real llama.cpp server (SmolLM2-135M, calls through a JSON schema the server enforces), real
PostgreSQL and Redis, and a loopback webhook receiver. The wake claims its slot, arrives, binds,
the model calls a tool (its first turn may do nothing else), the wake settles `completed`, its
delivery reaches the receiver, and `wake show` and `last_actions` show the call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.acceptance.test_daemon import REPO, Replica, query, start, wait_rows  # noqa: F401  (start is a fixture)
from tests.support import cli_fork, llama_fixtures
from tests.support.llama_fixtures import LiveLlama
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.live

SECRET = "a-live-webhook-secret"


def _cli(config: Path, *args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"))
    return cli_fork.run([sys.executable, "-m", "wake", "--config", str(config), *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=120)


def test_a_daemon_wake_thinks_with_a_real_model_calls_a_tool_settles_and_delivers(
    start: Callable[..., Replica], llama_server_info: LiveLlama, tmp_path: Path,  # noqa: F811  (the fixture)
) -> None:
    live = llama_server_info
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    with Receiver(secret=SECRET) as receiver:
        extra = llama_fixtures.tools_and_route(live, live.url, name="llama") + f"""
[delivery.hook]
kind = "webhook"
url = "{receiver.url}"
secret_credential = "hook_secret"
timeout_s = 5
max_attempts = 5
backoff_s = 0.2
backoff_max_s = 1
"""
        agents = """
[agents.demo]
timezone = "UTC"
[agents.demo.tiers.surface]
every = "1h"
binds = ["live_write"]
model = "llama"
tool_choice = { first = "pin_note", later = "none" }
budget = { max_turns = 2, max_tool_calls = 1, max_output_tokens = 200, max_cost_usd = 1.0 }
deliver_to = ["hook"]
catch_up = "one"
"""
        daemon = start("poll_s = 0.2\nlease_ttl_s = 30\nheartbeat_s = 1\ndrain_s = 30", agents, extra=extra, environ={"HOOK_SECRET": SECRET})
        daemon.wait_event("daemon.ready", timeout_s=120)
        config = tmp_path / "wake-0.toml"
        asked = _cli(config, "trigger", "--agent", "demo", "--tier", "surface", "--no-wait", tmp_path=tmp_path)
        assert asked.returncode == 0, asked.stderr
        settled = daemon.wait_event("wake.settled", timeout_s=600, where=lambda e: e.get("tier") == "surface")
        wake_id = uuid.UUID(settled["wake_id"])
        daemon.wait_event("outbox.sent", timeout_s=120, where=lambda e: e.get("wake_id") == str(wake_id))
        assert daemon.stop() == 0
    [row] = query(dsn, "SELECT status, trigger, tool_calls, refusals, turns, final_text, fence FROM wake_introspection_ledger WHERE wake_id = $1",
                  wake_id)
    assert (row["status"], row["tool_calls"], row["refusals"]) == ("completed", 1, 0), row
    assert row["final_text"], row  # the daybook entry, delivered
    acted = query(dsn, "SELECT tool, arguments, fence FROM last_actions WHERE wake_id = $1", wake_id)
    assert [a["tool"] for a in acted] == ["pin_note"] and acted[0]["fence"] == row["fence"]
    assert receiver.acted_on == [str(wake_id)] and all(r.signature_ok for r in receiver.requests)
    delivered = receiver.requests[0].json
    assert delivered["wake_id"] == str(wake_id) and delivered["text"] == row["final_text"]
    shown = _cli(config, "show", str(wake_id), "--json", tmp_path=tmp_path)
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["status"] == "completed" and record["tool_calls"] == 1
    said = _cli(config, "show", str(wake_id), "--transcript", "--json", tmp_path=tmp_path)
    assert said.returncode == 0, said.stderr
    transcript = json.loads(said.stdout)
    assert [(c["tool"], c["outcome"]) for c in transcript["calls"]] == [("pin_note", "ok")]  # the call, as the witness kept it
    written = acted[0]["arguments"]  # jsonb, as asyncpg returns it without a codec: text
    assert json.loads(transcript["calls"][0]["arguments"]) == (json.loads(written) if isinstance(written, str) else written)
    print(f"\ndaemon wake {wake_id}: turns={row['turns']} tool_calls={row['tool_calls']} pin_note arguments={acted[0]['arguments']}")
