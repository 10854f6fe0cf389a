"""A replica frozen inside a fenced transaction (issue 41): it holds the agent's fence row FOR
SHARE, and before, no other replica could advance the fence, so nothing ran the agent while the
freeze lasted. With `idle_in_transaction_session_timeout` = the lease TTL PostgreSQL ends the
frozen session; the other replica takes the agent's next slot once the lease (and, with
rendezvous ownership, the heartbeat) has expired, and the frozen replica's write, resumed, is
lost, never committed under its stale fence."""

from __future__ import annotations

import datetime as dt
import signal
from collections.abc import Callable

from tests.acceptance.test_daemon import agents, start, wait_rows  # noqa: F401  # `start` is the fixture
from tests.support import daemon_proc
from tests.support.daemon_proc import Replica, query

FROZEN = '[tools]\nmodules = ["tests.support.frozen_fence"]\n'
LEASE_TTL_S = 2.0
BEAT_S = 1.0
# the takeover: the lease TTL, the heartbeat's TTL (three beats) and one beat, and a loaded machine's lateness
BOUND_S = LEASE_TTL_S + 3 * BEAT_S + BEAT_S + 5.0


def test_a_replica_frozen_in_a_fenced_transaction_does_not_hold_the_agent(start: Callable[..., Replica]) -> None:  # noqa: F811
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    daemon = f"lease_ttl_s = {LEASE_TTL_S:g}\nheartbeat_s = {BEAT_S:g}"
    replicas = daemon_proc.ready_pair(start, daemon, agents(), FROZEN)
    [held] = wait_rows(dsn, "SELECT wake_id, pid, fence FROM wake_introspection_ledger WHERE status = 'started'")
    holder = replicas.pop(held["pid"])
    [other] = replicas.values()
    holder.wait_event("test.fenced", where=lambda e: e["wake_id"] == str(held["wake_id"]))
    holder.signal(signal.SIGSTOP)  # inside the transaction that locked the fence row
    stopped_at = dt.datetime.now(dt.UTC)
    try:
        # the other replica advances the fence past the frozen one and starts the agent's next slot
        [fresh] = wait_rows(
            dsn, "SELECT wake_id, fence, started_at FROM wake_introspection_ledger WHERE pid = $1 AND fence > $2 ORDER BY started_at LIMIT 1",
            other.pid, held["fence"], timeout_s=60,
        )
        assert fresh["started_at"] - stopped_at <= dt.timedelta(seconds=BOUND_S), (fresh, stopped_at)
        other.wait_event("test.fenced", where=lambda e: e["wake_id"] == str(fresh["wake_id"]))
    finally:
        start.release()  # type: ignore[attr-defined]
        holder.signal(signal.SIGCONT)
    # the frozen wake, resumed, finds its session ended (or its lease lost) and its wake ended: whichever it sees first
    holder.wait_event("wake.settle_refused", where=lambda e: e.get("wake_id") == str(held["wake_id"]), timeout_s=60)
    other.wait_event("test.fenced_write_committed", where=lambda e: e["wake_id"] == str(fresh["wake_id"]))
    # no stale write: the frozen wake's row never committed, the fresh one's did
    assert query(dsn, "SELECT 1 FROM last_actions WHERE wake_id = $1", held["wake_id"]) == []
    assert query(dsn, "SELECT 1 FROM last_actions WHERE wake_id = $1", fresh["wake_id"]) == [{"?column?": 1}]
    assert other.stop() == 0
