"""Incidents with a real `wake daemon` (issue 44, item 1; docs/incidents.md): a tier whose model
answers 500 fails wake after wake. Its first three failures open ONE incident and the daemon's
sender delivers ONE notice to a loopback webhook receiver; the fourth failure only counts (the
test holds the next wake's model call until it has seen that nothing more was sent); the success
that follows closes the incident with ONE recovery notice. With `pause_after_failures = 3` the
tier is paused after three failures and `wake status`, run as its own process, names the incident;
`wake incidents ack` records who acknowledged it once.

The model is `tests/support/openai_server.py` on loopback, failing by request count (each wake
makes one request: `max_retries = 0`), so which wake fails is fixed, not timed. Every wait polls
with a bound."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.test_daemon import REPO, Replica, query, start, wait_rows  # noqa: F401  (start is a fixture)
from tests.support import agents, cli_fork
from tests.support.openai_server import Response, ScriptedServer, completion, error
from tests.support.webhook_receiver import Receiver

# The incident watch runs once, at the start: its dead-man check (tested in its own tests) would
# rightly open an incident of its own for this 1 s tier whenever a loaded machine takes longer than
# two slots to settle the first failing wake (`none ever`), which is not what these tests count.
DAEMON = "poll_s = 0.2\nlease_ttl_s = 5\nheartbeat_s = 1\nincident_watch_s = 3600"
FAILURES = 4
HOLD_S = 90  # the longest the fifth model call waits for the test (it is released long before)


class FailingModel:
    """A model that answers 500 to its first `failures` requests (an error text naming a number that
    differs each time, normalised away by the signature), then holds the next one until `go` is set,
    then answers every request."""

    def __init__(self, failures: int | None) -> None:
        self.failures = failures
        self.count = 0
        self.waiting = threading.Event()  # the first answering request has arrived and is held
        self.go = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, _request: dict[str, Any]) -> Response:
        with self._lock:
            self.count += 1
            n = self.count
        if self.failures is None or n <= self.failures:
            return error(500, f"upstream broke at request {n} (id 0x{n:08x})")
        self.waiting.set()
        self.go.wait(HOLD_S)
        return completion("All clear.")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def _launch(launch: Callable[..., Replica], model: ScriptedServer, receiver: Receiver, pause_after: int | None) -> Replica:
    pause = f"pause_after_failures = {pause_after}\n" if pause_after is not None else ""
    tiers = {"surface": f'every = "1s"\nbinds = ["wake.surface"]\nmodel = "scripted"\ndeliver_to = ["hook"]\n{pause}'}
    extra = f"""
[models.scripted]
base_url = "{model.url}"
model = "scripted-1"
timeout_s = {HOLD_S + 30}
max_retries = 0

[delivery.hook]
kind = "webhook"
url = "{receiver.url}"
timeout_s = 10
max_attempts = 5
backoff_s = 0.2
backoff_max_s = 1
"""
    daemon = launch(DAEMON, agents.toml(tiers=tiers, timezone="UTC"), extra=extra)
    daemon.wait_event("daemon.ready")
    return daemon


def _kinds(receiver: Receiver) -> list[str]:
    return [str(r.json.get("kind", "wake")) for r in receiver.requests]


def _poll(what: Callable[[], Any], timeout_s: float, why: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if got := what():
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout_s}s: {why}")


FAILED = "SELECT wake_id, status, error FROM wake_introspection_ledger WHERE tier = 'surface' AND status = 'failed' ORDER BY started_at"


def test_a_failing_tier_opens_one_incident_with_one_notice_and_a_success_closes_it_with_one_recovery(
    start: Callable[..., Replica], receiver: Receiver,  # noqa: F811  (the fixture)
) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    failing = FailingModel(FAILURES)
    with ScriptedServer(default=failing) as model:
        daemon = _launch(start, model, receiver, None)
        try:
            # the fifth wake's model call is held: four failed rows, and the sender has had its chance
            assert failing.waiting.wait(120), daemon.log.read_text()[-3000:]
            failed = wait_rows(dsn, FAILED, at_least=FAILURES)
            assert len(failed) == FAILURES and all("500" in (r["error"] or "") for r in failed)
            found = query(dsn, "SELECT * FROM wake_incidents")
            assert len(found) == 1, [(i["tier"], i["signature"], i["sample_error"]) for i in found]
            [incident] = found
            assert incident["closed_at"] is None and incident["rows_seen"] == FAILURES
            assert incident["first_wake_id"] == failed[0]["wake_id"] and incident["last_wake_id"] == failed[-1]["wake_id"]
            _poll(lambda: not query(dsn, "SELECT 1 FROM wake_outbox WHERE state <> 'sent'"), 60, "the outbox drained")
            assert _kinds(receiver) == ["incident.opened"]  # one notice for four failures: the fourth sent nothing
            opened = receiver.requests[0].json
            assert opened["incident"] == incident["id"] and opened["about_wake"] == str(failed[0]["wake_id"])
            assert [e["incident"] for e in daemon.events("incident.opened")] == [incident["id"]]
        finally:
            failing.go.set()
        closed = wait_rows(dsn, "SELECT * FROM wake_incidents WHERE closed_at IS NOT NULL")
        [closer] = query(dsn, "SELECT status FROM wake_introspection_ledger WHERE wake_id = $1", closed[0]["closed_by_wake"])
        assert closer["status"] == "completed" and closed[0]["rows_seen"] == FAILURES
        _poll(lambda: "incident.recovered" in _kinds(receiver), 60, "the recovery notice arrived")
        _poll(lambda: not query(dsn, "SELECT 1 FROM wake_outbox WHERE state <> 'sent'"), 60, "the outbox drained")
        assert daemon.stop() == 0
    kinds = [k for k in _kinds(receiver) if k.startswith("incident.")]
    assert kinds == ["incident.opened", "incident.recovered"]
    assert len(query(dsn, "SELECT 1 FROM wake_incidents")) == 1
    # every request was acted on once: retries aside, one key a notice
    assert len(set(receiver.acted_on)) == len(receiver.acted_on)
    assert [e["incident"] for e in daemon.events("incident.closed")] == [incident["id"]]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env.update(PYTHONPATH=str(REPO), WAKE_STATE_DIR=str(tmp_path / "state"))
    return env


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_fork.run([sys.executable, "-m", "wake", "--config", str(tmp_path / "wake-0.toml"), *args],
                          capture_output=True, text=True, cwd=REPO, env=_env(tmp_path), timeout=120)


def test_pause_after_failures_pauses_the_tier_and_wake_status_names_the_incident(
    start: Callable[..., Replica], receiver: Receiver, tmp_path: Path,  # noqa: F811  (the fixture)
) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    with ScriptedServer(default=FailingModel(None)) as model:  # every call fails
        daemon = _launch(start, model, receiver, 3)
        [pause] = wait_rows(dsn, "SELECT * FROM wake_pauses WHERE agent_id = 'demo' AND tier = 'surface'")
        # the incident the pause names: its failures' (a slot coalesced away on a loaded machine is a
        # `missed` row, whose incident is another)
        [incident] = query(dsn, "SELECT * FROM wake_incidents WHERE tier = 'surface' AND signature LIKE 'failed:%'")
        assert pause["paused_by"] == "wake-incidents" and pause["reason"].startswith(f"incident {incident['id']}: 3 consecutive failures")
        paused = daemon.wait_event("incident.paused")
        assert paused["incident"] == incident["id"] and paused["failures"] == 3
        # the pause holds: the next slot is skipped, not run, so no fourth failure
        wait_rows(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE tier = 'surface' AND status = 'skipped'")
        assert len(query(dsn, FAILED)) == 3
        status = _cli(tmp_path, "status")
        # `wake incidents ack`: recorded once (the console's button is the same writer), a second is refused naming who
        acked, again = _cli(tmp_path, "incidents", "ack", str(incident["id"]), "--by", "ops-anna"), _cli(tmp_path, "incidents", "ack",
                                                                                                          f"#{incident['id']}", "--by", "ben")
        assert daemon.stop() == 0
    assert status.returncode == 0, status.stderr
    named = [line for line in status.stdout.splitlines() if f"incident {incident['id']}" in line]
    assert named and "demo" in named[0] and "surface" in named[0] and "wake-incidents" in named[0], status.stdout
    assert acked.returncode == 0 and acked.stdout.strip() == f"incident {incident['id']} acknowledged by ops-anna", acked.stderr
    assert again.returncode == 65 and "already acknowledged by ops-anna" in again.stderr, (again.stdout, again.stderr)
    assert [r["acked_by"] for r in query(dsn, "SELECT acked_by FROM wake_incidents")] == ["ops-anna"]
