"""Chat and mail channels through `wake daemon` processes: a kill -9 between a wake's settle and
its sends delivers once per channel after the restart (the json:// webhook's receiver acts on the
wake id once, the mailbox gets one mail), `wake outbox` shows the Apprise targets redacted, and a
message signed into the inbox of a running daemon wakes the agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.acceptance.test_daemon import REPO, Replica, query, start, wait_rows  # noqa: F401  (start is a fixture)
from tests.support import agents, cli_fork
from tests.support.openai_server import ScriptedServer, completion
from tests.support.smtp_server import SmtpServer
from tests.support.webhook_receiver import Receiver
from wake.daemon import inbox

REPORT = "Ticket 4411 is waiting on you."
HOOK_TOKEN = "tok-31c7d9e0a4b2"
INBOX_SECRET = "inbox-secret-a81f44"
DAEMON = "poll_s = 0.2\nlease_ttl_s = 5\nheartbeat_s = 1\ndrain_s = 5"
AGENTS = agents.toml(tiers={"surface": agents.on_demand_surface('deliver_to = ["hook", "mail"]')}, timezone="UTC")


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=lambda _request: completion(REPORT)) as s:
        yield s


def _extra(model: ScriptedServer, receiver: Receiver, smtp: SmtpServer, inbox_listen: str = "") -> str:
    # rto: Apprise's own read timeout (4 s by default) must outlast the held reply too
    hook = receiver.url.replace("http://", "json://") + "?token={hook_token}&rto=30"
    return agents.scripted(model.url, timeout_s=10) + f"""
[delivery.hook]
kind = "apprise"
url = "{hook}"
# long enough that the held first attempt is still waiting when the test kills the daemon, on a
# loaded machine too (a shorter one times out and the second attempt delivers before the kill)
timeout_s = 20
max_attempts = 5
backoff_s = 0.2
backoff_max_s = 1

[delivery.mail]
kind = "apprise"
url = "{smtp.url()}"
timeout_s = 3
max_attempts = 200
backoff_s = 0.2
backoff_max_s = 1
{inbox_listen}
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"), HOOK_TOKEN=HOOK_TOKEN)
    return env


def _cli(config: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return cli_fork.run(
        [sys.executable, "-m", "wake", "--config", str(config), *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )


def test_a_kill_between_settle_and_send_delivers_once_per_channel(
    start: Callable[..., Replica], model: ScriptedServer, tmp_path: Path,  # noqa: F811  (the fixture)
) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    smtp = SmtpServer()  # not listening yet: every mail attempt before the kill fails to connect
    with Receiver(hold_first=True) as receiver:
        extra = _extra(model, receiver, smtp)
        first = start(DAEMON, AGENTS, extra=extra, environ={"HOOK_TOKEN": HOOK_TOKEN})
        first.wait_event("daemon.ready")
        asked = _cli(tmp_path / "wake-0.toml", "at", "1s", "--tier", "surface", env=_env(tmp_path))
        assert asked.returncode == 0, asked.stderr
        shot = uuid.UUID(asked.stdout.split()[1])
        # The webhook's receiver has acted and holds its reply; the mail has not gone out. The
        # wake is settled with both deliveries pending, and the daemon dies.
        assert receiver.held.wait(90), first.log.read_text()[-3000:]
        first.wait_event("outbox.retry", timeout_s=60, where=lambda e: e.get("route") == "mail")
        listed = _cli(tmp_path / "wake-0.toml", "outbox", "--json", env=_env(tmp_path))
        first.proc.kill()
        first.proc.wait(30)
        receiver.release()
        pending = query(dsn, "SELECT route, state FROM wake_outbox WHERE wake_id = $1 ORDER BY route", shot)
        assert [(r["route"], r["state"]) for r in pending] == [("hook", "pending"), ("mail", "pending")]
        with smtp:
            second = start(DAEMON, AGENTS, extra=extra, environ={"HOOK_TOKEN": HOOK_TOKEN})
            for route in ("hook", "mail"):
                second.wait_event("outbox.sent", timeout_s=90, where=lambda e, r=route: e.get("route") == r and e.get("wake_id") == str(shot))
            assert second.stop() == 0
    sent = query(dsn, "SELECT route, state FROM wake_outbox WHERE wake_id = $1 ORDER BY route", shot)
    assert [(r["route"], r["state"]) for r in sent] == [("hook", "sent"), ("mail", "sent")]
    # once per channel: the webhook heard twice with one key and acted once; one mail, carrying the wake id
    assert len(receiver.requests) == 2 and {r.headers["idempotency-key"] for r in receiver.requests} == {str(shot)}
    assert receiver.acted_on == [str(shot)]
    assert len(smtp.messages) == 1 and REPORT in smtp.text_of(0) and f"wake {shot}" in smtp.text_of(0)
    # `wake outbox` showed both Apprise deliveries with their targets, the token in none of its output
    assert listed.returncode == 0, listed.stderr
    rows = {r["route"]: r for r in json.loads(listed.stdout)}
    assert rows["hook"]["target"] == receiver.url.replace("http://", "json://") and rows["mail"]["target"].startswith("mailto://127.0.0.1:")
    logs = first.log.read_text() + second.log.read_text()
    assert HOOK_TOKEN not in listed.stdout and HOOK_TOKEN not in logs


def test_a_signed_message_to_a_running_daemon_wakes_the_agent(
    start: Callable[..., Replica], model: ScriptedServer, tmp_path: Path,  # noqa: F811  (the fixture)
) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    with Receiver() as receiver, SmtpServer() as smtp:
        listen = '[inbox]\nlisten = "127.0.0.1:0"\nwake_tier = "surface"\n'
        daemon = start(DAEMON, AGENTS, extra=_extra(model, receiver, smtp, listen), environ={"HOOK_TOKEN": HOOK_TOKEN,
                                                                                           "WAKE_INBOX_SECRET": INBOX_SECRET})
        url = daemon.wait_event("inbox.listening")["url"]
        body = json.dumps({"agent": "demo", "author": "Ada", "channel": "telegram", "text": "Call me.", "idempotency_key": "tg:7"}).encode()
        stamp = str(int(time.time()))
        reply = httpx.post(url, content=body, timeout=30, headers={
            inbox.TIMESTAMP_HEADER: stamp, inbox.SIGNATURE_HEADER: inbox.signature(INBOX_SECRET, stamp, body)})
        assert reply.status_code == 201, reply.text
        wake_id = uuid.UUID(reply.json()["wake_id"])
        daemon.wait_event("outbox.sent", timeout_s=90, where=lambda e: e.get("wake_id") == str(wake_id) and e.get("route") == "mail")
        assert daemon.stop() == 0
    rows = wait_rows(dsn, "SELECT status, trigger FROM wake_introspection_ledger WHERE wake_id = $1", wake_id)
    assert [(r["status"], r["trigger"]) for r in rows] == [("completed", "at")]
    assert query(dsn, "SELECT body, channel FROM human_contact") == [{"body": "Call me.", "channel": "telegram"}]
    assert INBOX_SECRET not in daemon.log.read_text()
