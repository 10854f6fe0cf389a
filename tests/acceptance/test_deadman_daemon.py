"""The dead-man check with real daemons (issue 44, item 2; docs/incidents.md): the replica that
owns an agent is frozen (SIGSTOP), so the agent's whisper stops settling; before the other replica
takes the agent over (its heartbeat outlives two slots by far), that replica's incident watch
opens one dead-man incident for the tier, and the tier's next settled wake, run by the replica
that took it over, closes it. The other replica's metrics carry the tier's
`wake_last_settled_timestamp_seconds`. Every wait polls with a bound."""

from __future__ import annotations

import datetime as dt
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.acceptance.test_daemon import agents, start, wait_rows  # noqa: F401  # `start` is the fixture
from tests.support.daemon_proc import Replica, query
from tests.support.processes import free_port

# a takeover after 30 s (three heartbeats): the check (every 0.5 s) sees the silence after two 2 s slots first
DAEMON = "lease_ttl_s = 3\nheartbeat_s = 10\nincident_watch_s = 0.5"
DEADMAN = "missed: no settled row since %"
RAN = ("completed", "quiet", "failed", "aborted", "halted", "abandoned")


def _gauge(port: int) -> float | None:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = re.search(r'^wake_last_settled_timestamp_seconds\{agent="demo",tier="whisper"\} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else None


def _poll(what: Callable[[], Any], timeout_s: float, why: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s}s: {why}")


def test_a_frozen_owner_s_silent_tier_gets_one_dead_man_incident_from_the_other_replica(start: Callable[..., Replica]) -> None:  # noqa: F811
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    ports = [free_port(), free_port()]
    replicas = [start(DAEMON, agents('every = "2s"'), extra=f'[metrics]\nlisten = "127.0.0.1:{p}"\n') for p in ports]
    for r in replicas:
        r.wait_event("daemon.ready")
    # the owner once both replicas see both: until the first replica's next heartbeat it still
    # schedules the agent the second took when it joined, so rows by one replica (even three in a
    # row) did not say who owns it (freezing the one about to drop it froze no owner: a CI flake)
    def views() -> list[dict[str, Any]] | None:
        latest = [r.events("ownership.members")[-1:] for r in replicas]
        return [e for [e] in latest] if all(len(v) == 1 and len(v[0]["members"]) == 2 for v in latest) else None

    settled_views = _poll(views, 60, "both replicas' membership names both")
    [owner] = [r for r, view in zip(replicas, settled_views, strict=True) if view["owned"] == 1]
    assert sorted(view["owned"] for view in settled_views) == [0, 1]
    both_see_both = dt.datetime.now(dt.UTC)

    def owner_ran() -> bool:
        return bool(query(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE tier = 'whisper' AND status IN ('completed', 'quiet')"
                               " AND started_at > $1 AND pid = $2", both_see_both, owner.pid))

    _poll(owner_ran, 60, "a settled whisper by the owner once both replicas agree")
    other, other_port = next((r, p) for r, p in zip(replicas, ports, strict=True) if r is not owner)

    owner.signal(signal.SIGSTOP)
    frozen_at = dt.datetime.now(dt.UTC)
    try:
        sql = ("SELECT * FROM wake_incidents WHERE agent_id = 'demo' AND tier = 'whisper' AND signature LIKE $1 AND opened_at >= $2"
               " ORDER BY id")
        [incident] = wait_rows(dsn, sql, DEADMAN, frozen_at, timeout_s=60)
        assert incident["closed_at"] is None and incident["rows_seen"] == 1
        assert "(dead-man check)" in incident["sample_error"]
        # the other replica opened it (the owner is frozen), once however many rounds saw the silence
        opened = other.wait_event("incident.opened", where=lambda e: e.get("incident") == incident["id"] and e.get("deadman") is True)
        assert opened["agent"] == "demo" and opened["tier"] == "whisper"
        assert len([e for e in other.events("incident.opened") if e.get("incident") == incident["id"]]) == 1
        assert other.events("incidents.watch_failed") == []
    finally:
        owner.signal(signal.SIGCONT)
    # the tier settles again (the other replica took the agent over, or the owner is back): the incident closes
    closed = _poll(lambda: query(dsn, "SELECT closed_at, closed_by_wake FROM wake_incidents WHERE id = $1 AND closed_at IS NOT NULL",
                                 incident["id"]), 90, "the dead-man incident closed")
    [closer] = query(dsn, "SELECT status, tier FROM wake_introspection_ledger WHERE wake_id = $1", closed[0]["closed_by_wake"])
    assert closer["status"] in ("completed", "quiet") and closer["tier"] == "whisper"
    assert len(query(dsn, sql, DEADMAN, frozen_at)) == 1

    # the gauge: the other replica's last check read the tier's newest settled row
    def settled_gauge() -> bool:
        value = _gauge(other_port)
        rows = query(dsn, "SELECT extract(epoch FROM finished_at)::float8 AS at FROM wake_introspection_ledger"
                          " WHERE agent_id = 'demo' AND tier = 'whisper' AND status = ANY($1::text[]) ORDER BY started_at DESC LIMIT 5", list(RAN))
        return value is not None and any(abs(r["at"] - value) < 1e-3 for r in rows)

    _poll(settled_gauge, 30, "wake_last_settled_timestamp_seconds equals a newest settled row's finish")
    for r in replicas:
        r.stop()
