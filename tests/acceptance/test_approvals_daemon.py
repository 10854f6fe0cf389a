"""Approvals end to end (docs/approvals.md), across two wakes of a real `wake daemon`: the scripted
model (on loopback) calls an MCP server's tool the operator marked `requires_approval`; the call
is queued, not run; the operator approves it with the CLI; the next wake runs it on the real
server (once) before its model runs, and that wake's arrival shows the result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.acceptance.test_daemon import REPO, Replica, query, start  # noqa: F401  (start is a fixture)
from tests.support import agents as agent_configs
from tests.support import cli_fork
from tests.support.openai_server import ScriptedServer, completion


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def _toml(model: ScriptedServer, state: Path) -> tuple[str, str]:
    extra = f"""
[tools.mcp.ours]
command = "{sys.executable}"
args = ["-m", "tests.support.mcp_server", "--state", "{state}"]
cwd = "{REPO}"
surfaces = {{ "echo" = ["wake.surface"] }}
requires_approval = ["echo"]
call_timeout_s = 30
start_timeout_s = 60
""" + agent_configs.scripted(model.url, timeout_s=30)
    return extra, agent_configs.toml(tiers={"surface": agent_configs.on_demand_surface()}, timezone="UTC")


def _echoes(state: Path) -> int:
    calls = state / "calls"
    return calls.read_text(encoding="utf-8").splitlines().count("echo") if calls.exists() else 0


def test_a_call_approved_between_two_daemon_wakes_runs_once_in_the_second_and_its_arrival_shows_it(
    start: Callable[..., Replica], model: ScriptedServer, tmp_path: Path,  # noqa: F811  (the fixture)
) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    state = tmp_path / "server"
    state.mkdir()
    extra, agents = _toml(model, state)
    replica = start("poll_s = 0.2\nlease_ttl_s = 10\nheartbeat_s = 1\ndrain_s = 10", agents, extra=extra)
    replica.wait_event("daemon.ready", timeout_s=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return cli_fork.run([sys.executable, "-m", "wake", "--config", str(tmp_path / "wake-0.toml"), *args],
                              capture_output=True, text=True, cwd=REPO, env=env, timeout=240)

    model.push(
        completion("Release 1.2 passed its checks; deploying it.", [("ours__echo", {"text": "deploy 1.2"})]),
        completion("Asked for the deploy; it waits for approval."),
    )
    first = cli("trigger", "--agent", "demo", "--tier", "surface", "--timeout", "180", "--json")
    assert first.returncode == 0, first.stderr
    wake_1 = uuid.UUID(json.loads(first.stdout)["wake_id"])
    assert _echoes(state) == 0  # queued, not run
    [pending] = query(dsn, "SELECT id, state, wake_id, tool, arguments, reason FROM tool_approvals")
    assert (pending["state"], pending["wake_id"], pending["tool"]) == ("pending", wake_1, "ours__echo")
    assert json.loads(pending["arguments"]) == {"text": "deploy 1.2"} and "passed its checks" in pending["reason"]
    answer = next(m for m in model.requests[1].json["messages"] if m["role"] == "tool")
    assert "queued for approval" in answer["content"]

    listed = cli("approvals", "--agent", "demo", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(a["id"], a["state"]) for a in json.loads(listed.stdout)] == [(pending["id"], "pending")]
    approved = cli("approvals", "approve", str(pending["id"]), "--by", "alice")
    assert approved.returncode == 0, approved.stderr
    again = cli("approvals", "approve", str(pending["id"]), "--by", "alice")
    assert again.returncode == 65 and len(again.stderr.strip().splitlines()) == 1 and "recorded once" in again.stderr

    second = cli("trigger", "--agent", "demo", "--tier", "surface", "--timeout", "180", "--json")
    assert second.returncode == 0, second.stderr
    wake_2 = uuid.UUID(json.loads(second.stdout)["wake_id"])
    assert _echoes(state) == 1  # run once, by the second wake
    [ran] = query(dsn, "SELECT state, outcome, result, run_wake_id, decided_by FROM tool_approvals")
    assert (ran["state"], ran["outcome"], ran["run_wake_id"], ran["decided_by"]) == ("ran", "ok", wake_2, "alice")
    assert "echo: deploy 1.2" in ran["result"]
    shown = cli("show", str(wake_2), "--arrival")
    assert shown.returncode == 0, shown.stderr
    assert "ran in this wake: ok" in shown.stdout and "echo: deploy 1.2" in shown.stdout
    sent = json.dumps(model.requests[-1].json["messages"])
    assert "echo: deploy 1.2" in sent  # the second wake's model read the result in its arrival

    third = cli("trigger", "--agent", "demo", "--tier", "surface", "--timeout", "180", "--json")
    assert third.returncode == 0, third.stderr
    assert _echoes(state) == 1  # never again
    assert replica.stop() == 0
