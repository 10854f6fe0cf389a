"""`wake daemon` over Redis through Sentinel (tests/support/sentinel.py): its wakes go on after
`SENTINEL FAILOVER` and after the primary is killed, each slot with its one row, and it stops cleanly."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from tests.acceptance.test_daemon import agents, wait_rows
from tests.support import pooler, sentinel
from tests.support.daemon_proc import REPO, Replica, query

COMPLETED_AFTER = "SELECT 1 FROM wake_introspection_ledger WHERE status = 'completed' AND scheduled_for > $1"


def test_the_daemon_follows_the_primary_across_failovers(tmp_path: Path, pg_dsn: str, cluster: sentinel.SentinelCluster) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "NOTIFY_SOCKET"))}
    env.update(PYTHONPATH=str(REPO), WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"))
    config = tmp_path / "wake.toml"
    every_second = agents(whisper='every = "1s"')
    config.write_text(f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}{cluster.toml()}[daemon]\nheartbeat_s = 1\nlease_ttl_s = 3\n{every_second}')
    replica = Replica(config, tmp_path / "replica.log", env)
    try:
        replica.wait_event("daemon.ready", timeout_s=120)
        wait_rows(pg_dsn, COMPLETED_AFTER, dt.datetime.now(dt.UTC), timeout_s=120)
        for fail in (cluster.failover, cluster.kill_primary):
            fail()
            wait_rows(pg_dsn, COMPLETED_AFTER, dt.datetime.now(dt.UTC), timeout_s=120)  # a slot after the failover ran to the end
        assert replica.stop() == 0
    finally:
        if replica.proc.poll() is None:
            replica.proc.kill()
            replica.proc.wait(10)
    assert cluster.failovers == 2
    twice = query(pg_dsn, "SELECT scheduled_for FROM wake_introspection_ledger GROUP BY scheduled_for HAVING count(*) > 1")
    assert twice == []
    assert not query(pg_dsn, "SELECT 1 FROM wake_introspection_ledger WHERE status = 'started'")
