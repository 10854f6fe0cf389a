"""Side tasks that cannot start end the daemon with exit 78 before it claims any slot; one that
fails later is restarted with backoff and shown down meanwhile (wake.daemon.supervise)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import cli_fork, failing_side_task, pooler
from tests.support.daemon_proc import REPO, Replica, query
from wake.daemon import supervise
from wake.observe import metrics

AGENT = '[agents.demo]\ntimezone = "UTC"\n[agents.demo.tiers.whisper]\nevery = "1s"\nbinds = ["wake.whisper"]\n'


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NOTIFY_SOCKET", "WATCHDOG_"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"), WAKE_INBOX_SECRET="s" * 32, **extra)
    return env


@pytest.fixture
def taken_port() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield int(sock.getsockname()[1])
    sock.close()


@pytest.mark.parametrize("section", ["console", "inbox", "metrics"])
def test_an_address_that_cannot_be_bound_ends_the_start_with_78_and_no_claim(
    section: str, taken_port: int, tmp_path: Path, pg_dsn: str, redis_url: str,
) -> None:
    env = _env(tmp_path)
    config = tmp_path / "wake.toml"
    config.write_text(f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n'
                      f'[{section}]\nlisten = "127.0.0.1:{taken_port}"\n{AGENT}')
    replica = Replica(config, tmp_path / "replica.log", env)
    try:
        status = replica.proc.wait(120)
    finally:
        replica.out.close()
    text = (tmp_path / "replica.log").read_text()
    assert status == 78, text[-2000:]
    assert f"127.0.0.1:{taken_port}" in text and "secret" not in text, text[-2000:]
    assert replica.events("daemon.ready") == []
    assert query(pg_dsn, "SELECT 1 FROM wake_slots WHERE agent_id = 'demo'") == []


# A replica without its heartbeat is not in `wake status` at all, so that one fails alone; every
# other side task fails at once in one daemon, each restarted and shown down on its own.
GROUPS = {"heartbeat": ("heartbeat",), "the-others": tuple(sorted(set(failing_side_task.BODIES) - {"heartbeat"}))}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_side_tasks_that_fail_are_restarted_shown_down_and_the_daemon_exits_0_on_sigterm(
    group: str, tmp_path: Path, pg_dsn: str, redis_url: str,
) -> None:
    tasks = GROUPS[group]
    config = tmp_path / "wake.toml"
    listens = '[inbox]\nlisten = "127.0.0.1:0"\n[console]\nlisten = "127.0.0.1:0"\n'
    if "anchoring" in tasks:  # the companion runs only with [anchor] daemon (its authority is never reached: the task fails first)
        (tmp_path / "ca.pem").write_text("")
        listens += '[anchor]\ntsa_url = "http://127.0.0.1:9/tsr"\nca_file = "ca.pem"\ndaemon = true\n'
    config.write_text(f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n'
                      '[tools]\nmodules = ["tests.support.failing_side_task"]\n'
                      f'{listens}[daemon]\nheartbeat_s = 0.5\n{AGENT}')
    replica = Replica(config, tmp_path / "replica.log", _env(tmp_path, WAKE_TEST_FAILING_TASK=",".join(tasks)))
    try:
        replica.wait_event("daemon.ready", timeout_s=120)
        for task in tasks:
            replica.wait_event("daemon.side_task_restarted", timeout_s=60, where=lambda e, t=task: e["task"] == t)
            failed = replica.wait_event("daemon.side_task_failed", timeout_s=60, where=lambda e, t=task: e["task"] == t and e["restarts"] >= 2)
            assert f"the {task} side task fails" in failed["error"]
        shown = [t for t in tasks if t != "heartbeat"]
        if shown:
            seen = _status_until(config, tmp_path, lambda r: all(t in r.get("down", {}) for t in shown))
            for task in shown:
                assert "fails" in seen["down"][task]["error"] and seen["down"][task]["restarts"] >= 1, (task, seen)
        assert {e["task"] for e in replica.events("daemon.side_task_failed")} == set(tasks)
    finally:
        status = replica.stop(60)
    assert status == 0, replica.log.read_text()[-2000:]


def _status_until(config: Path, tmp_path: Path, ready: Callable[[dict[str, Any]], bool], timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        done = cli_fork.run([sys.executable, "-m", "wake", "--config", str(config), "status", "--json"], capture_output=True, text=True,
                              cwd=REPO, env=_env(tmp_path), timeout=120)
        for replica in json.loads(done.stdout).get("replicas", []) if done.returncode == 0 else []:
            if ready(replica):
                return dict(replica)
        if time.monotonic() > deadline:
            raise AssertionError(f"wake status never showed it down: {done.stdout}{done.stderr}")


async def test_a_failing_side_task_is_restarted_with_backoff_and_shown_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervise, "BACKOFF_MIN_S", 0.01)
    m = metrics.Metrics(agents={}, version="test")
    metrics.install(m)
    stop = asyncio.Event()
    seen: list[dict[str, object]] = []
    sup = supervise.Supervisor(stop=stop)
    sup.ready = True
    sup.on_change = lambda: seen.append(sup.down_view())
    runs = 0

    async def outbox() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError(f"boom {runs}")
        await stop.wait()

    try:
        task = sup.start("outbox", outbox)
        async with asyncio.timeout(30):
            while runs < 3:
                await asyncio.sleep(0)
            stop.set()
            await task
    finally:
        metrics.install(None)
    assert runs == 3
    assert [list(v) for v in seen] == [["outbox"], [], ["outbox"], []]
    assert "boom 1" in str(seen[0]["outbox"])
    assert m.side_restarts.labels("outbox")._value.get() == 2
    assert sup.fatal is None and sup.down == {}
