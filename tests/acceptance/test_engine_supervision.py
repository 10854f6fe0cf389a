"""The daemon supervises its embedded engines: SIGTERM the embedded redis-server (or stop the
embedded PostgreSQL) under a running daemon and it is started again (`engine.restarted`), and wakes complete again after it; `wake
status` reports each store's health and exits 69 while one is down, without starting it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from tests.support import cli_fork
from tests.support.daemon_proc import REPO, Replica

AGENTS = '[agents.demo]\ntimezone = "UTC"\n[agents.demo.tiers.whisper]\nevery = "1s"\nbinds = ["wake.whisper"]\n'


def test_a_killed_embedded_redis_is_restarted_by_the_daemon_and_wakes_go_on(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "NOTIFY_SOCKET"))}
    state = tmp_path / "state"
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(state), WAKE_ENGINES__IDLE_S="0")
    config = tmp_path / "wake.toml"
    config.write_text("[daemon]\nheartbeat_s = 1\n" + AGENTS)
    replica = Replica(config, tmp_path / "daemon.log", env)
    try:
        replica.wait_event("daemon.ready", timeout_s=120)
        replica.wait_event("wake.settled", timeout_s=120)
        old = int((state / "redis" / "redis.pid").read_text().split()[0])
        os.kill(old, signal.SIGTERM)
        psutil.Process(old).wait(timeout=60)
        restarted = replica.wait_event("engine.restarted", timeout_s=120)
        assert restarted["engine"] == "redis" and "used it" in restarted["reason"]
        new = int((state / "redis" / "redis.pid").read_text().split()[0])
        assert new != old and psutil.pid_exists(new)
        after = len(replica.events("wake.settled"))
        replica.wait_event("wake.settled", timeout_s=120, where=lambda e: len(replica.events("wake.settled")) > after + 1)

        # the embedded PostgreSQL, stopped under the daemon, is started again too
        postmaster = int((state / "postgres" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGINT)  # a fast shutdown
        psutil.Process(postmaster).wait(timeout=60)
        pg = replica.wait_event("engine.restarted", timeout_s=120, where=lambda e: e["engine"] == "postgres")
        assert "used it" in pg["reason"] and len(replica.events("engine.restarted")) == 2  # once each, no repeats
        after = len(replica.events("wake.settled"))
        replica.wait_event("wake.settled", timeout_s=120, where=lambda e: len(replica.events("wake.settled")) > after + 1)

        # wake status: each store's health; with the embedded Redis killed again, it says so and exits 69
        status = cli_fork.run([sys.executable, "-m", "wake", "--config", str(config), "status", "--json"],
                                env=env, capture_output=True, text=True, timeout=120)
        assert status.returncode == 0, status.stderr
        assert {s["store"]: s["ok"] for s in json.loads(status.stdout)["stores"]} == {"postgres": True, "redis": True}
        assert replica.stop() == 0
    finally:
        if replica.proc.poll() is None:
            replica.proc.kill()
            replica.proc.wait(30)  # reaped here, not left to the next test's garbage collection


def test_wake_status_reports_each_store_and_exits_69_while_postgres_is_down(tmp_path: Path, redis_url: str) -> None:
    import pgserver
    from pgserver._commands import pg_ctl

    from wake.stores import engines

    dsn = engines.start_postgres(tmp_path / "own")
    server = pgserver.get_server(tmp_path / "own" / "postgres", cleanup_mode="stop")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "NOTIFY_SOCKET"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"))
    config = tmp_path / "wake.toml"
    config.write_text(f'[postgres]\ndsn = "{dsn}"\nconnect_timeout_s = 3\n[redis]\nurl = "{redis_url}"\n' + AGENTS)

    def status() -> subprocess.CompletedProcess[str]:
        return cli_fork.run([sys.executable, "-m", "wake", "--config", str(config), "status", "--json"],
                              env=env, capture_output=True, text=True, timeout=120)

    try:
        up = status()
        assert up.returncode == 0, up.stderr
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
        down = status()
        stores = {s["store"]: s for s in json.loads(down.stdout)["stores"]}
        assert down.returncode == 69 and not stores["postgres"]["ok"] and stores["redis"]["ok"], down.stdout + down.stderr
        assert "postgres unreachable" in stores["postgres"]["detail"]
        text = cli_fork.run([sys.executable, "-m", "wake", "--config", str(config), "status"], env=env, capture_output=True, text=True, timeout=120)
        assert text.returncode == 69 and text.stdout.startswith("postgres: DOWN (postgres unreachable"), text.stdout
    finally:
        # pgserver checks the postmaster is running, fails its pg_ctl stop, then signals it: the
        # postmaster this test stopped can exit in between (psutil.NoSuchProcess, seen in CI)
        with contextlib.suppress(psutil.NoSuchProcess):
            server.cleanup()
