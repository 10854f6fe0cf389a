"""`wake daemon` as processes on one PostgreSQL and one Redis: replicas, kill -9, a stale fence,
a restart after a gap, drain, and systemd's notify protocol on a real datagram socket.

Wakes are held open where a test must catch one in flight by `tests/support/slow_think.py` (a
tools module that stands in for the model loop): each wake thinks until the test releases it
(`start.release()`). The tests wait on rows and log events, never on the clock; their timeouts
are generous, since a loaded two-core machine can take seconds to start a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support import cli_fork, daemon_proc, pooler
from tests.support.daemon_proc import REPO, Replica, query

# The replicas test runs this long (a minute is the full check; 20 s keeps CI on two cores reasonable
# and still covers 20 slots, each contested by three replicas).
REPLICA_RUN_S = float(os.environ.get("WAKE_TEST_REPLICA_RUN_S", "20"))
SLOW = '[tools]\nmodules = ["tests.support.slow_think"]\n'


def agents(whisper: str = 'every = "1s"', surface: str | None = None, full: str | None = None) -> str:
    body = f'[agents.demo]\ntimezone = "Europe/Stockholm"\n[agents.demo.tiers.whisper]\n{whisper}\nbinds = ["wake.whisper"]\n'
    if surface:
        body += f'[agents.demo.tiers.surface]\n{surface}\nbinds = ["wake.surface"]\n'
    if full:
        body += f'[agents.demo.tiers.full]\n{full}\nbinds = ["wake"]\n'
    return body


@pytest.fixture
def start(tmp_path: Path, pg_dsn: str, redis_url: str) -> Iterator[Callable[..., Replica]]:
    """Start replicas with a config of `[daemon]` keys and agents, on this test's stores."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "NOTIFY_SOCKET", "WATCHDOG_"))
    }
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"), WAKE_ENGINES__IDLE_S="0")
    replicas: list[Replica] = []
    barrier = tmp_path / "release-the-wakes"

    def launch(daemon: str, agents_toml: str, *, extra: str = "", environ: dict[str, str] | None = None) -> Replica:
        """`extra=SLOW` holds every wake in its think step until `launch.release()`."""
        n = len(replicas)
        config = tmp_path / f"wake-{n}.toml"
        config.write_text(f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n{extra}\n[daemon]\n{daemon}\n{agents_toml}')
        replica = Replica(config, tmp_path / f"replica-{n}.log", {**env, "WAKE_TEST_RELEASE": str(barrier), **(environ or {})})
        replicas.append(replica)
        return replica

    launch.pg_dsn = pg_dsn  # type: ignore[attr-defined]
    launch.release = barrier.touch  # type: ignore[attr-defined]
    launch.hold = lambda: barrier.unlink(missing_ok=True)  # type: ignore[attr-defined]
    yield launch
    for replica in replicas:
        if replica.proc.poll() is None:
            replica.proc.kill()
            replica.proc.wait(10)
        replica.out.close()


def wait_rows(dsn: str, sql: str, *args: Any, timeout_s: float = 60, at_least: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = query(dsn, sql, *args)
        if len(rows) >= at_least:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"fewer than {at_least} rows within {timeout_s}s for: {sql}")


def test_three_replicas_run_every_slot_exactly_once(start: Callable[..., Replica]) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    # every replica schedules the agent (not its owner alone): the slot claim is what is under test
    replicas = [start('lease_ttl_s = 10\nheartbeat_s = 1\nownership = "every_replica"', agents()) for _ in range(3)]
    for r in replicas:
        r.wait_event("daemon.ready")
    first = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=2)
    last = first + dt.timedelta(seconds=REPLICA_RUN_S - 1)
    # the run lasts until the last slot's row has settled (the schedule is the thing under test)
    wait_rows(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE scheduled_for = $1 AND status <> 'started'", last,
              timeout_s=REPLICA_RUN_S + 120)
    for r in replicas:
        assert r.stop() == 0
    rows = query(dsn, "SELECT * FROM wake_introspection_ledger WHERE scheduled_for BETWEEN $1 AND $2 ORDER BY scheduled_for", first, last)
    expected = [first + dt.timedelta(seconds=i) for i in range(int(REPLICA_RUN_S))]
    assert [r["scheduled_for"] for r in rows] == expected  # every slot, once, no gap
    assert {r["status"] for r in rows} <= {"completed", "skipped"}
    assert all(r["note"].startswith("skipped: busy") for r in rows if r["status"] == "skipped")
    claims = query(dsn, "SELECT scheduled_for, wake_id FROM wake_slots WHERE scheduled_for BETWEEN $1 AND $2 ORDER BY scheduled_for", first, last)
    assert [(c["scheduled_for"], c["wake_id"]) for c in claims] == [(r["scheduled_for"], r["wake_id"]) for r in rows]
    # each slot: one replica won it, every other replica that fired it was told it was taken
    for slot in (s.isoformat() for s in expected):
        fired = [r for r in replicas if any(e.get("scheduled_for") == slot for e in r.events("wake.started") + r.events("wake.skipped"))]
        taken = [e for r in replicas for e in r.events("wake.skipped") if e.get("reason") == "slot_taken" and e["scheduled_for"] == slot]
        assert len(taken) == len(fired) - 1, slot
    contested = sum(
        all(any(e.get("scheduled_for") == s.isoformat() for e in r.events("wake.skipped") + r.events("wake.started")) for r in replicas)
        for s in expected
    )
    assert contested >= 0.8 * len(expected)  # (a replica whose loop lagged a whole second coalesces a slot)
    # one wake of the agent at a time, whichever replica ran it
    ran = [r for r in rows if r["status"] == "completed"]
    assert all(a["finished_at"] <= b["started_at"] for a, b in zip(ran, ran[1:], strict=False))
    assert len({r["pid"] for r in ran}) >= 1 and len(ran) >= len(expected) // 2


def test_kill_9_the_replica_running_a_wake(start: Callable[..., Replica]) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    daemon = "lease_ttl_s = 2\nheartbeat_s = 1"
    replicas = daemon_proc.ready_pair(start, daemon, agents(), SLOW)
    [running] = wait_rows(dsn, "SELECT wake_id, pid FROM wake_introspection_ledger WHERE status = 'started'")
    victim = replicas.pop(running["pid"])
    victim.signal(signal.SIGKILL)
    victim.proc.wait(10)
    killed_at = dt.datetime.now(dt.UTC)
    [survivor] = replicas.values()
    abandoned = wait_rows(
        dsn, "SELECT * FROM wake_introspection_ledger WHERE wake_id = $1 AND status = 'abandoned'", running["wake_id"], timeout_s=20,
    )
    assert "lost the agent's lease" in abandoned[0]["error"]
    nxt = wait_rows(
        dsn, "SELECT * FROM wake_introspection_ledger WHERE pid = $1 AND started_at > $2 AND status IN ('started', 'completed')",
        survivor.pid, killed_at,
    )
    assert nxt[0]["scheduled_for"] > running_slot(dsn, running["wake_id"])
    assert any(e["wake_id"] == str(running["wake_id"]) for e in survivor.events("wake.abandoned"))
    start.release()  # type: ignore[attr-defined]
    assert survivor.stop() == 0


def running_slot(dsn: str, wake_id: uuid.UUID) -> dt.datetime:
    slot: dt.datetime = query(dsn, "SELECT scheduled_for FROM wake_introspection_ledger WHERE wake_id = $1", wake_id)[0]["scheduled_for"]
    return slot


def test_a_stale_lease_holder_writes_nothing_after_losing_the_lease(start: Callable[..., Replica]) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    daemon = "lease_ttl_s = 2\nheartbeat_s = 1"
    replicas = daemon_proc.ready_pair(start, daemon, agents(), SLOW)
    [stale] = wait_rows(dsn, "SELECT wake_id, pid, fence FROM wake_introspection_ledger WHERE status = 'started'")
    holder = replicas.pop(stale["pid"])
    [other] = replicas.values()
    holder.signal(signal.SIGSTOP)
    try:
        # past the TTL the other replica takes the lease with a newer fence and closes the row
        fresh = wait_rows(
            dsn, "SELECT wake_id, fence FROM wake_introspection_ledger WHERE pid = $1 AND fence > $2", other.pid, stale["fence"], timeout_s=20,
        )
        assert query(dsn, "SELECT status FROM wake_introspection_ledger WHERE wake_id = $1", stale["wake_id"]) == [{"status": "abandoned"}]
    finally:
        start.release()  # type: ignore[attr-defined]  # both wakes go on to their write
        holder.signal(signal.SIGCONT)
    refused = holder.wait_event("test.action_refused", where=lambda e: e["wake_id"] == str(stale["wake_id"]))
    assert refused["fence"] == stale["fence"] and refused["newest"] > stale["fence"]
    holder.wait_event("wake.settle_refused", where=lambda e: e["wake_id"] == str(stale["wake_id"]))
    assert holder.events("fence.stale")
    assert any(e["fence"] == stale["fence"] for e in holder.events("lease.lost"))
    # the fresh wake's own write goes through; the stale one's never does
    wait_rows(dsn, "SELECT 1 FROM last_actions WHERE wake_id = $1", fresh[0]["wake_id"], timeout_s=20)
    assert query(dsn, "SELECT * FROM last_actions WHERE wake_id = $1", stale["wake_id"]) == []
    assert query(
        dsn, "SELECT status, finished_at IS NOT NULL AS closed FROM wake_introspection_ledger WHERE wake_id = $1", stale["wake_id"],
    ) == [{"status": "abandoned", "closed": True}]
    assert holder.stop() == 0 and other.stop() == 0


def test_restart_after_a_three_hour_gap_catches_up_once(start: Callable[..., Replica]) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    tiers = agents('every = "15m"', surface='every = "1h"', full='cron = "0 * * * *"')
    now = dt.datetime.now(dt.UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    gap_start = hour - dt.timedelta(hours=3)
    for tier in ("whisper", "surface", "full"):
        query(
            dsn,
            "INSERT INTO wake_slots (agent_id, tier, scheduled_for, trigger, claimed_by, wake_id)"
            " VALUES ('demo', $1, $2, 'schedule', 'before-the-gap', $3) RETURNING 1",
            tier, gap_start, uuid.uuid4(),
        )
    first = start("", tiers)
    first.wait_event("daemon.ready")
    rows = wait_rows(dsn, "SELECT * FROM wake_introspection_ledger WHERE trigger = 'catch_up' AND status <> 'started'", at_least=2)
    first.wait_event("wake.catch_up_skipped")
    assert first.stop() == 0
    rows = query(dsn, "SELECT tier, trigger, scheduled_for, status FROM wake_introspection_ledger ORDER BY tier")
    newest_quarter = now.replace(minute=now.minute // 15 * 15, second=0, microsecond=0)
    assert rows == [
        {"tier": "full", "trigger": "catch_up", "scheduled_for": hour, "status": "completed"},
        {"tier": "surface", "trigger": "catch_up", "scheduled_for": hour, "status": "completed"},
    ]
    [skipped] = first.events("wake.catch_up_skipped")
    assert skipped["tier"] == "whisper" and skipped["missed"] in {newest_quarter.isoformat(), (newest_quarter + dt.timedelta(minutes=15)).isoformat()}
    second = start("", tiers)
    second.wait_event("wake.catch_up_skipped")  # its catch-up pass has looked at every tier
    assert second.stop() == 0
    assert len(query(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE trigger = 'catch_up'")) == 2  # never replayed
    assert second.events("wake.catch_up") == []


# The daemon's own loop (uvloop, the default) and asyncio's (`daemon.event_loop`, the way back):
# the signals, the reload, the drain and the cancellation on each.
@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_sigterm_drains_a_running_wake_and_cancels_past_drain_s(start: Callable[..., Replica], event_loop: str) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    chosen = "" if event_loop == "uvloop" else f'\nevent_loop = "{event_loop}"'
    patient = start(f"drain_s = 120{chosen}", agents('every = "1s"'), extra=SLOW)
    assert patient.wait_event("daemon.ready")["event_loop"] == event_loop
    [running] = wait_rows(dsn, "SELECT wake_id FROM wake_introspection_ledger WHERE status = 'started'")
    patient.signal(signal.SIGHUP)  # a reload on the way: harmless
    patient.wait_event("daemon.reloaded")
    patient.signal(signal.SIGTERM)
    patient.wait_event("daemon.draining")
    start.release()  # type: ignore[attr-defined]  # the wake ends while the daemon drains
    assert patient.proc.wait(120) == 0
    assert patient.events("daemon.drain_timeout") == []
    assert query(dsn, "SELECT status FROM wake_introspection_ledger WHERE wake_id = $1", running["wake_id"]) == [{"status": "completed"}]
    assert query(dsn, "SELECT count(*) AS n FROM wake_introspection_ledger WHERE status = 'started'") == [{"n": 0}]
    patient.stop()

    start.hold()  # type: ignore[attr-defined]  # this wake is never released: the drain times out
    hasty = start(f"drain_s = 2{chosen}", agents('every = "1s"'), extra=SLOW)
    [running] = wait_rows(dsn, "SELECT wake_id FROM wake_introspection_ledger WHERE status = 'started'")
    hasty.signal(signal.SIGTERM)
    assert hasty.proc.wait(120) == 0
    [row] = query(dsn, "SELECT status, error FROM wake_introspection_ledger WHERE wake_id = $1", running["wake_id"])
    assert row == {"status": "aborted", "error": "drain timeout on SIGTERM after 2 s"}
    assert hasty.events("daemon.drain_timeout")[0]["cancelled"] >= 1
    hasty.stop()


def test_sighup_with_a_bad_config_keeps_the_old_one(start: Callable[..., Replica], tmp_path: Path) -> None:
    replica = start("", agents('every = "15m"'))
    replica.wait_event("daemon.ready")
    config = tmp_path / "wake-0.toml"
    config.write_text(config.read_text().replace('every = "15m"', 'every = "whenever"'))
    replica.signal(signal.SIGHUP)
    failed = replica.wait_event("daemon.reload_failed")
    assert "agents.demo.tiers.whisper.every" in failed["error"] and "whenever" in failed["error"]
    assert replica.proc.poll() is None  # still running, on the old config
    assert replica.stop() == 0


def test_notify_socket_gets_ready_watchdog_and_stopping(start: Callable[..., Replica], tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(30)
        replica = start("", agents('every = "15m"'), environ={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
        messages = [sock.recv(4096).decode()]
        assert messages[0].split("\n")[0] == "READY=1", messages
        assert "STATUS=next wake demo/whisper at " in messages[0]
        deadline = time.monotonic() + 120  # each recv is bounded too (the socket's timeout)
        while sum(m == "WATCHDOG=1" for m in messages) < 3:
            assert time.monotonic() < deadline, messages
            messages.append(sock.recv(4096).decode())
        replica.signal(signal.SIGTERM)
        while not messages[-1].startswith("STOPPING=1"):
            assert time.monotonic() < deadline, messages
            messages.append(sock.recv(4096).decode())
        assert replica.proc.wait(30) == 0
    assert messages.index(next(m for m in messages if m.startswith("STOPPING=1"))) > messages.index("WATCHDOG=1")


def test_wake_up_takes_the_lease_and_refuses_a_busy_agent(start: Callable[..., Replica], tmp_path: Path, redis_url: str) -> None:
    import redis

    dsn = start.pg_dsn  # type: ignore[attr-defined]
    config = tmp_path / "up.toml"
    config.write_text(f'[postgres]\ndsn = "{dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n{agents()}')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json")

    def up() -> subprocess.CompletedProcess[str]:
        return cli_fork.run(
            [sys.executable, "-m", "wake", "--config", str(config), "up"], capture_output=True, text=True, cwd=REPO, env=env, timeout=60,
        )

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.set("wake:lease:demo", "elsewhere:4242:cafe", px=30_000)  # a daemon's wake in progress
    busy = up()
    assert busy.returncode == 75, busy.stderr
    assert busy.stderr.strip().splitlines()[-1] == (
        "wake: agent 'demo' is busy: another wake holds its lease (elsewhere:4242:cafe); try again when it has settled"
    )
    assert query(dsn, "SELECT count(*) AS n FROM wake_introspection_ledger") == [{"n": 0}]
    client.delete("wake:lease:demo")
    done = up()
    assert done.returncode == 0, done.stderr
    [row] = query(dsn, "SELECT trigger, status, fence FROM wake_introspection_ledger")
    assert row["trigger"] == "manual" and row["status"] == "completed" and row["fence"] is not None
    assert client.get("wake:lease:demo") is None  # released
    client.close()


def test_trigger_and_status_against_a_running_daemon(start: Callable[..., Replica], tmp_path: Path, redis_url: str) -> None:
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    # Slots a week and a fortnight apart: a scheduled whisper firing during the test would hold the
    # lease in SLOW's think step, and the trigger below would find the agent busy (CI hit a 15m slot once).
    replica = start("heartbeat_s = 0.5", agents('every = "7d"', surface='every = "14d"'), extra=SLOW)
    replica.wait_event("daemon.ready")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return cli_fork.run(
            [sys.executable, "-m", "wake", "--config", str(tmp_path / "wake-0.toml"), *args],
            capture_output=True, text=True, cwd=REPO, env=env, timeout=60,
        )

    started = cli("trigger", "--agent", "demo", "--tier", "surface", "--no-wait", "--json")
    assert started.returncode == 0, started.stderr
    wake_id = json.loads(started.stdout)["wake_id"]
    wait_rows(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE wake_id = $1 AND status = 'started'", uuid.UUID(wake_id))
    status = wait_status(cli, lambda s: bool(s["running"]))  # a heartbeat with the wake in it (held until released)
    assert [r["pid"] for r in status["replicas"]] == [replica.pid]
    [running] = status["running"]
    assert (running["agent"], running["tier"], running["wake_id"], running["trigger"]) == ("demo", "surface", wake_id, "manual")
    assert {(f["agent"], f["tier"]) for f in status["next_fires"]} == {("demo", "whisper"), ("demo", "surface")}
    busy = cli("trigger", "--agent", "demo", "--tier", "whisper")
    assert busy.returncode == 1 and "busy" in busy.stderr, busy.stderr
    start.release()  # type: ignore[attr-defined]
    wait_rows(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE wake_id = $1 AND status = 'completed'", uuid.UUID(wake_id))
    waited = cli("trigger", "--agent", "demo", "--tier", "whisper", "--json")
    assert waited.returncode == 0, waited.stderr
    outcome = json.loads(waited.stdout)
    assert outcome["outcome"] == "settled" and outcome["status"] == "completed"
    assert query(
        dsn, "SELECT trigger, tier FROM wake_introspection_ledger WHERE wake_id = $1", uuid.UUID(outcome["wake_id"]),
    ) == [{"trigger": "manual", "tier": "whisper"}]
    assert replica.stop() == 0


def wait_status(cli: Callable[..., subprocess.CompletedProcess[str]], ready: Callable[[dict[str, Any]], bool],
                timeout_s: float = 120) -> dict[str, Any]:
    """`wake status --json` asked again until `ready` holds (each ask starts a process: seconds when loaded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = cli("status", "--json")
        status: dict[str, Any] = json.loads(done.stdout) if done.returncode == 0 else {"running": []}
        if done.returncode == 0 and ready(status):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"wake status never showed what was waited for within {timeout_s}s: {done.stdout}{done.stderr}")


def test_slots_while_postgres_is_stopped_are_recorded_missed_when_it_is_back(tmp_path: Path, redis_url: str) -> None:
    """A PostgreSQL of its own, stopped (`pg_ctl stop -m fast`) under a running daemon and started again."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
        from pgserver._commands import pg_ctl

    from ledgers import schema
    from wake.stores import engines

    dsn = engines.start_postgres(tmp_path / "own")
    server = pgserver.get_server(tmp_path / "own" / "postgres", cleanup_mode="stop")

    async def migrate() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await schema.migrate(conn)
        finally:
            await conn.close()

    asyncio.run(migrate())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "NOTIFY_SOCKET"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"))
    config = tmp_path / "outage.toml"
    config.write_text(f'[postgres]\ndsn = "{dsn}"\n[redis]\nurl = "{redis_url}"\n[daemon]\nheartbeat_s = 1\n{agents()}')
    replica = Replica(config, tmp_path / "outage.log", env)
    try:
        replica.wait_event("daemon.ready", timeout_s=120)
        wait_rows(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE status = 'completed'")
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
        for count in range(1, 4):  # three slots fire while it is down
            replica.wait_event("slot.spooled", timeout_s=120, where=lambda e, n=count: len(replica.events("slot.spooled")) >= n)
        server.ensure_postgres_running()
        replica.wait_event("wake.missed", timeout_s=120, where=lambda e: len(replica.events("wake.missed")) >= 3)
        assert replica.stop() == 0  # the spool is empty by the end of the drain or `daemon.spool_lost` says so
        spooled = replica.events("slot.spooled")
        rows = query(dsn, "SELECT scheduled_for, status, note FROM wake_introspection_ledger WHERE scheduled_for = ANY($1::timestamptz[])",
                     [dt.datetime.fromisoformat(e["scheduled_for"]) for e in spooled])
    finally:
        if replica.proc.poll() is None:
            replica.proc.kill()
            replica.proc.wait(30)  # reaped here, not left to the next test's garbage collection
        replica.out.close()
        with contextlib.suppress(Exception):
            server.cleanup()
    assert all(e["error"].startswith(f"postgres unreachable at {dsn}") for e in spooled), spooled[0]
    assert not [e for e in replica.events("daemon.task_failed") if "FileNotFoundError" in e["error"]]
    lost = sum(e["slots"] for e in replica.events("daemon.spool_lost"))
    assert len(rows) + lost == len({e["scheduled_for"] for e in spooled}) and len(rows) >= 3  # one row a slot
    assert {r["status"] for r in rows} == {"missed"}
    assert all(r["note"].startswith("missed: store_unreachable: postgres unreachable from ") for r in rows)
    assert len(replica.events("wake.missed")) == len(rows)
