"""Scale-out as processes on one PostgreSQL and one Redis: each agent is scheduled by one replica
(rendezvous hashing over the heartbeats), a killed owner's agents are taken over within the
heartbeat TTL plus one heartbeat with the slots it missed recorded once, a stopping replica hands
its agents over, and in steady state each slot is claimed once.

The tests wait on rows and log events, never on the clock; the one bound they check (the takeover)
is read from the log's own timestamps, with room for a loaded two-core machine.
"""

from __future__ import annotations

import datetime as dt
import signal
import time
from collections.abc import Callable
from typing import Any

from tests.acceptance.test_daemon import start, wait_rows  # noqa: F401  # `start` is the fixture
from tests.support.daemon_proc import Replica, query

BEAT_S = 1.0
TTL_S = 3 * BEAT_S  # the heartbeat key's TTL (three beats)
BOUND_S = TTL_S + BEAT_S  # the stated takeover bound
# What a loaded two-core machine may add to the bound: a process that is late to its next beat.
LOAD_SLACK_S = 3.0
DAEMON = f"lease_ttl_s = 2\nheartbeat_s = {BEAT_S:g}"
AGENTS = [f"a{i}" for i in range(6)]


def fleet(names: list[str] = AGENTS) -> str:
    return "".join(
        f'[agents.{n}]\ntimezone = "UTC"\n[agents.{n}.tiers.whisper]\nevery = "1s"\nbinds = ["wake.whisper"]\n' for n in names
    )


def ts(event: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))


def settled(replicas: list[Replica], members: int) -> None:
    """Wait until every replica has read a membership of `members` and the shares cover every agent once."""
    for r in replicas:
        r.wait_event("daemon.ready")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        views = [r.events("ownership.members") for r in replicas]
        shares = [share(r) for r in replicas]
        if all(v and len(v[-1]["members"]) == members for v in views) and sorted(a for s in shares for a in s) == sorted(AGENTS):
            return
        time.sleep(0.2)
    raise AssertionError(f"the replicas did not settle on {members} members: {[share(r) for r in replicas]}")


def replica_id(replica: Replica) -> str:
    return str(replica.events("daemon.ready")[0]["replica"])


def share(replica: Replica) -> set[str]:
    """The agents a replica owns now, as its own handover events tell it."""
    mine: set[str] = set()
    for e in replica.events("wake.handover"):
        if e["direction"] == "gained":
            mine |= set(e["agents"])
        else:
            mine -= set(e["agents"])
    return mine


def one_row_per_slot(dsn: str, first: dt.datetime, last: dt.datetime, agents: list[str]) -> list[dict[str, Any]]:
    rows = query(
        dsn, "SELECT agent_id, scheduled_for, status, note, pid FROM wake_introspection_ledger"
        " WHERE scheduled_for BETWEEN $1 AND $2 ORDER BY agent_id, scheduled_for", first, last,
    )
    expected = int((last - first).total_seconds()) + 1
    for agent in agents:
        slots = [r["scheduled_for"] for r in rows if r["agent_id"] == agent]
        assert slots == [first + dt.timedelta(seconds=i) for i in range(expected)], (agent, slots)
    assert {r["status"] for r in rows} <= {"completed", "skipped", "missed"}, {r["status"] for r in rows}
    return rows


def test_the_owner_killed_its_agents_are_taken_over_within_the_bound_and_missed_slots_recorded_once(start: Callable[..., Replica]) -> None:  # noqa: F811  # the fixture
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    replicas = [start(DAEMON, fleet()) for _ in range(3)]
    settled(replicas, 3)
    # steady state: every slot of a window is claimed once, by its owner
    steady_from = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=2)
    steady_to = steady_from + dt.timedelta(seconds=5)
    wait_rows(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE scheduled_for = $1 AND status <> 'started'", steady_to,
              timeout_s=60, at_least=len(AGENTS))
    claimed = len(query(dsn, "SELECT 1 FROM wake_slots WHERE scheduled_for BETWEEN $1 AND $2", steady_from, steady_to))
    taken = [e for r in replicas for e in r.events("wake.skipped")
             if e.get("reason") == "slot_taken" and steady_from.isoformat() <= e["scheduled_for"] <= steady_to.isoformat()]
    assert claimed == len(AGENTS) * 6
    assert (claimed + len(taken)) / claimed <= 1.05, taken
    # the owner of a0 is the replica that ran its latest slot
    [latest] = query(dsn, "SELECT pid FROM wake_introspection_ledger WHERE agent_id = 'a0' AND scheduled_for = $1", steady_to)
    victim = next(r for r in replicas if r.pid == latest["pid"])
    victim_id = replica_id(victim)
    victim_agents = share(victim)
    assert "a0" in victim_agents
    victim.signal(signal.SIGKILL)
    victim.proc.wait(10)
    killed_at = dt.datetime.now(dt.UTC)
    survivors = [r for r in replicas if r is not victim]
    # the survivors take every one of its agents, each from it, because its heartbeat expired
    took: dict[str, dt.datetime] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and set(took) != victim_agents:
        for r in survivors:
            for e in r.events("wake.handover"):
                if e["direction"] == "gained" and e["from"] == victim_id and ts(e) > killed_at:
                    assert e["why"] == "expired", e
                    took.update({a: ts(e) for a in e["agents"]})
        time.sleep(0.2)
    assert set(took) == victim_agents
    last_beat_before_kill = killed_at  # its last heartbeat was at or before the kill
    assert max(took.values()) - last_beat_before_kill <= dt.timedelta(seconds=BOUND_S + LOAD_SLACK_S), took
    # a0's next slot after the takeover runs on the new owner
    new_owner = next(r for r in survivors if any(e["from"] == victim_id and e["why"] == "expired" and "a0" in e["agents"]
                                                 for e in r.events("wake.handover")))
    [ran] = wait_rows(
        dsn, "SELECT scheduled_for FROM wake_introspection_ledger WHERE agent_id = 'a0' AND pid = $1 AND status = 'completed'"
        " AND scheduled_for > $2 ORDER BY scheduled_for LIMIT 1", new_owner.pid, steady_to, timeout_s=60,
    )
    assert ran["scheduled_for"] <= took["a0"] + dt.timedelta(seconds=BEAT_S + 1)
    # every slot of the whole run has one row; the ones nobody ran while the owner was dead say so
    end = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=3)
    wait_rows(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE scheduled_for = $1 AND status <> 'started'", end,
              timeout_s=60, at_least=len(AGENTS))
    for r in survivors:
        assert r.stop() == 0
    rows = one_row_per_slot(dsn, steady_from, end, AGENTS)
    missed = [r for r in rows if r["status"] == "missed"]
    assert missed and {r["agent_id"] for r in missed} <= victim_agents
    assert all(f"its owner {victim_id} expired" in r["note"] for r in missed)
    assert all(killed_at - dt.timedelta(seconds=2) <= r["scheduled_for"] <= killed_at + dt.timedelta(seconds=BOUND_S + LOAD_SLACK_S)
               for r in missed)


def test_a_stopping_replica_hands_its_agents_over_at_the_next_heartbeat(start: Callable[..., Replica]) -> None:  # noqa: F811  # the fixture
    dsn = start.pg_dsn  # type: ignore[attr-defined]
    replicas = [start(DAEMON, fleet()) for _ in range(2)]
    settled(replicas, 2)
    leaving, staying = sorted(replicas, key=lambda r: -len(share(r)))  # the one with more agents (of six, three at least)
    # every agent has run once (an agent that never ran has no slots to catch up: the first start invents no history)
    wait_rows(dsn, "SELECT DISTINCT agent_id FROM wake_introspection_ledger WHERE status <> 'started'", timeout_s=60, at_least=len(AGENTS))
    leaving_id = replica_id(leaving)
    handed = share(leaving)
    assert handed
    first = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=1)
    assert leaving.stop() == 0
    stopped = leaving.events("wake.handover")[-1]
    assert (stopped["direction"], stopped["why"], set(stopped["agents"])) == ("lost", "stopped", handed)
    got = staying.wait_event(
        "wake.handover", where=lambda e: e["direction"] == "gained" and e["from"] == leaving_id and e["why"] != "joined", timeout_s=30,
    )
    assert got["why"] == "stopped" and set(got["agents"]) == handed
    assert ts(got) - ts(stopped) <= dt.timedelta(seconds=BEAT_S + LOAD_SLACK_S)
    end = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=3)
    wait_rows(dsn, "SELECT 1 FROM wake_introspection_ledger WHERE scheduled_for = $1 AND status <> 'started'", end,
              timeout_s=60, at_least=len(AGENTS))
    assert staying.stop() == 0
    one_row_per_slot(dsn, first, end, AGENTS)
