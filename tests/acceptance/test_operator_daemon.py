"""Operator controls through `wake daemon` processes: the delivery outbox survives a kill -9
between settle and send (the receiver acts on the wake once), a one-shot wake fires once, and a
pause is honoured by a running daemon without a reload."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.acceptance.test_daemon import REPO, Replica, query, start, wait_rows  # noqa: F401  (start is a fixture)
from tests.support import agents as agent_configs
from tests.support import cli_fork, pooler
from tests.support.openai_server import ScriptedServer, completion
from tests.support.webhook_receiver import Receiver

SECRET = "a-webhook-secret"
REPORT = "Ticket 4411 is waiting on you."


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=lambda _request: completion(REPORT)) as s:
        yield s


def _toml(model: ScriptedServer, receiver: Receiver) -> tuple[str, str]:
    """A surface tier that never fires by itself (1 January), thinks through the scripted server
    and delivers to the receiver; a fast pass of the sender and the one-shot poller."""
    extra = agent_configs.scripted(model.url, timeout_s=10) + f"""
[delivery.hook]
kind = "webhook"
url = "{receiver.url}"
secret_credential = "hook_secret"
timeout_s = 3
max_attempts = 5
backoff_s = 0.2
backoff_max_s = 1
"""
    return extra, agent_configs.toml(tiers={"surface": agent_configs.on_demand_surface('deliver_to = ["hook"]')}, timezone="UTC")


DAEMON = "poll_s = 0.2\nlease_ttl_s = 5\nheartbeat_s = 1\ndrain_s = 5"


def _cli(config: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return cli_fork.run(
        [sys.executable, "-m", "wake", "--config", str(config), *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"), HOOK_SECRET=SECRET)
    return env


def test_a_kill_between_settle_and_acknowledged_send_still_delivers_exactly_once(
    start: Callable[..., Replica], model: ScriptedServer, tmp_path: Path,  # noqa: F811  (the fixture)
) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    with Receiver(secret=SECRET, hold_first=True) as receiver:
        extra, agents = _toml(model, receiver)
        first = start(DAEMON, agents, extra=extra, environ={"HOOK_SECRET": SECRET})
        first.wait_event("daemon.ready")
        asked = _cli(tmp_path / "wake-0.toml", "at", "1s", "--tier", "surface", "--note", "crash test", env=_env(tmp_path))
        assert asked.returncode == 0, asked.stderr
        shot = uuid.UUID(asked.stdout.split()[1])
        # The receiver has acted on the delivery and holds its reply: the wake is settled, the
        # outbox row is still pending. Now the daemon dies without hearing back.
        assert receiver.held.wait(90), first.log.read_text()[-3000:]
        settled = query(dsn, "SELECT status, trigger FROM wake_introspection_ledger WHERE wake_id = $1", shot)
        pending = query(dsn, "SELECT state, attempts FROM wake_outbox WHERE wake_id = $1", shot)
        first.proc.kill()
        first.proc.wait(30)
        receiver.release()
        assert settled == [{"status": "completed", "trigger": "at"}] and pending == [{"state": "pending", "attempts": 1}]

        second = start(DAEMON, agents, extra=extra, environ={"HOOK_SECRET": SECRET})
        second.wait_event("outbox.sent", timeout_s=90, where=lambda e: e.get("wake_id") == str(shot))
        assert second.stop() == 0
    sent = query(dsn, "SELECT state, attempts, sent_at FROM wake_outbox WHERE wake_id = $1", shot)
    assert [(r["state"], r["attempts"]) for r in sent] == [("sent", 2)]
    assert len(receiver.requests) == 2 and {r.headers["idempotency-key"] for r in receiver.requests} == {str(shot)}
    assert all(r.signature_ok for r in receiver.requests) and receiver.requests[0].raw == receiver.requests[1].raw
    assert receiver.acted_on == [str(shot)]  # exactly once, from the receiver's point of view
    rows = query(dsn, "SELECT wake_id, status FROM wake_introspection_ledger")
    assert [(r["wake_id"], r["status"]) for r in rows] == [(shot, "completed")]  # one wake, one row
    assert len(model.requests) == 1


def test_a_wake_settled_by_a_process_that_never_sends_is_delivered_by_the_daemon(
    start: Callable[..., Replica], model: ScriptedServer, tmp_path: Path, pg_dsn: str, redis_url: str,  # noqa: F811  (the fixture)
) -> None:
    with Receiver(secret=SECRET) as receiver:
        extra, agents = _toml(model, receiver)
        config = tmp_path / "up.toml"
        config.write_text(f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n{extra}\n{agents}')
        up = _cli(config, "up", "--tier", "surface", "--json", env=_env(tmp_path))  # settles, queues, exits: no sender here
        assert up.returncode == 0, up.stderr
        queued = query(pg_dsn, "SELECT wake_id, state, attempts FROM wake_outbox")
        assert [(r["state"], r["attempts"]) for r in queued] == [("pending", 0)] and receiver.requests == []
        listed = _cli(config, "outbox", env=_env(tmp_path))
        assert listed.returncode == 0 and "pending" in listed.stdout and "hook" in listed.stdout
        daemon = start(DAEMON, agents, extra=extra, environ={"HOOK_SECRET": SECRET})
        daemon.wait_event("outbox.sent", timeout_s=90)
        assert daemon.stop() == 0
    assert receiver.acted_on == [str(queued[0]["wake_id"])] and len(receiver.requests) == 1
    assert _cli(config, "outbox", env=_env(tmp_path)).stdout.strip() == "the outbox is empty: every delivery was sent"


def test_a_pause_reaches_a_running_daemon_and_its_slots_are_skipped_rows(
    start: Callable[..., Replica], tmp_path: Path,  # noqa: F811  (the fixture)
) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    agents = '[agents.demo]\ntimezone = "UTC"\n[agents.demo.tiers.whisper]\nevery = "1s"\nbinds = ["wake.whisper"]\n'
    daemon = start(DAEMON, agents)
    daemon.wait_event("daemon.ready")
    paused = _cli(tmp_path / "wake-0.toml", "pause", "demo", "--reason", "maintenance", "--by", "dana", env=_env(tmp_path))
    assert paused.returncode == 0 and "paused demo/all tiers by dana" in paused.stdout, paused.stderr
    since = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    rows = wait_rows(dsn, "SELECT note FROM wake_introspection_ledger WHERE status = 'skipped' AND scheduled_for > $1", since,
                     timeout_s=60, at_least=2)
    status = _cli(tmp_path / "wake-0.toml", "status", env=_env(tmp_path))
    resumed = _cli(tmp_path / "wake-0.toml", "resume", "demo", env=_env(tmp_path))
    after = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    ran = wait_rows(dsn, "SELECT status FROM wake_introspection_ledger WHERE status = 'completed' AND scheduled_for > $1", after, timeout_s=60)
    assert daemon.stop() == 0
    assert all(r["note"] == "skipped: paused: by dana (maintenance)" for r in rows)
    assert "pauses" in status.stdout and "dana" in status.stdout and "maintenance" in status.stdout
    assert resumed.returncode == 0 and "resumed demo/all" in resumed.stdout and ran
    per_slot = query(dsn, "SELECT scheduled_for, count(*) AS n FROM wake_introspection_ledger GROUP BY scheduled_for HAVING count(*) > 1")
    assert per_slot == []  # one row per slot, paused or not
