"""Rendezvous ownership (`wake.daemon.ownership`): every replica computes the same owner from the
same membership, a change moves only the agents it must, and a replica's view says why."""

from __future__ import annotations

import datetime as dt

from wake.daemon import ownership, rendezvous, schedule
from wake.daemon.control import ReplicaState

AGENTS = [f"agent-{i}" for i in range(2000)]


def test_the_owner_is_the_same_whatever_order_the_membership_is_read_in() -> None:
    members = ["r-a", "r-b", "r-c"]
    first = rendezvous.assign(AGENTS, members)
    assert rendezvous.assign(AGENTS, list(reversed(members))) == first
    assert set(first.values()) == set(members)


def test_shares_are_near_even() -> None:
    members = [f"r-{i}" for i in range(4)]
    owners = rendezvous.assign(AGENTS, members)
    counts = [sum(1 for o in owners.values() if o == m) for m in members]
    assert all(abs(c - len(AGENTS) / 4) < 0.1 * len(AGENTS) / 4 for c in counts), counts


def test_a_replica_leaving_moves_only_its_own_agents_and_spreads_them() -> None:
    members = ["r-a", "r-b", "r-c", "r-d"]
    before = rendezvous.assign(AGENTS, members)
    after = rendezvous.assign(AGENTS, [m for m in members if m != "r-b"])
    moved = {a for a in AGENTS if before[a] != after[a]}
    assert moved == {a for a in AGENTS if before[a] == "r-b"}
    assert {after[a] for a in moved} == {"r-a", "r-c", "r-d"}


def test_a_replica_joining_takes_only_from_the_others_what_it_now_owns() -> None:
    before = rendezvous.assign(AGENTS, ["r-a", "r-b"])
    after = rendezvous.assign(AGENTS, ["r-a", "r-b", "r-new"])
    moved = {a for a in AGENTS if before[a] != after[a]}
    assert moved == {a for a in AGENTS if after[a] == "r-new"}
    assert 0.25 * len(AGENTS) < len(moved) < 0.42 * len(AGENTS)


def test_leaving_replicas_are_not_members() -> None:
    t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    states = [
        ReplicaState(replica_id=r, host="h", pid=1, version="v", started_at=t, heartbeat_at=t, leaving=r == "r-b")
        for r in ("r-c", "r-b", "r-a")
    ]
    assert rendezvous.members_of(states) == ("r-a", "r-c")


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def view(replica: str, clock: Clock) -> ownership.Ownership:
    return ownership.Ownership(replica_id=replica, ttl_s=3.0, monotonic=clock)


def whys(change: ownership.Change) -> dict[str, set[str | None]]:
    found: dict[str, set[str | None]] = {}
    for h in change.gained + change.lost:
        found.setdefault(h.why, set()).add(h.from_replica)
    return found


def test_a_view_says_why_it_gained_and_lost_agents() -> None:
    clock = Clock()
    a = view("r-a", clock)
    first = a.update(["r-a", "r-b"], AGENTS, {})  # beside a live replica: a takeover from it
    assert {(h.why, h.from_replica) for h in first.gained} == {("joined", "r-b")} and not first.lost
    assert a.owned == {x for x, r in rendezvous.assign(AGENTS, ["r-a", "r-b"]).items() if r == "r-a"}
    # r-b's heartbeat expires: r-a takes all of r-b's agents, from r-b, because it expired
    expired = a.update(["r-a"], AGENTS, {"r-b": False})
    assert whys(expired) == {"expired": {"r-b"}} and a.owned == set(AGENTS)
    # r-c joins: r-a hands it its share
    joined = a.update(["r-a", "r-c"], AGENTS, {})
    assert {(h.why, h.to_replica) for h in joined.lost} == {("joined", "r-c")} and not joined.gained
    # r-c stops on purpose
    stopped = a.update(["r-a"], AGENTS, {"r-c": True})
    assert whys(stopped) == {"stopped": {"r-c"}}
    # an agent added to the config, one removed
    reconf = a.update(["r-a"], [*AGENTS[1:], "agent-new"], {})
    assert {(h.why, h.agents) for h in reconf.gained} == {("configured", ("agent-new",))}
    assert {(h.why, h.agents) for h in reconf.lost} == {("unconfigured", ("agent-0",))}


def test_a_replica_alone_at_its_first_read_starts_the_cluster() -> None:
    a = view("r-a", Clock())
    first = a.update(["r-a"], AGENTS, {})
    assert {(h.why, h.from_replica) for h in first.gained} == {("start", None)} and a.owned == set(AGENTS)


def test_a_replica_alone_at_its_first_read_while_the_cluster_mark_names_another_takes_over() -> None:
    """The others' heartbeats expired (a Redis outage they are still coming back from), so this
    replica reads itself alone: the agents are taken over, their missed slots recorded, not started."""
    a = view("r-a", Clock())
    a.resumed = True
    first = a.update(["r-a"], AGENTS, {})
    assert {(h.why, h.from_replica) for h in first.gained} == {("resumed", None)} and a.owned == set(AGENTS)
    assert first.gained_agents(but="start") == sorted(AGENTS)


def test_a_stale_heartbeat_drops_everything_and_the_next_beat_takes_the_share_back() -> None:
    clock = Clock()
    a = view("r-a", clock)
    assert not a.fresh()
    a.beat(clock.t)
    a.update(["r-a"], AGENTS[:10], {})
    assert a.fresh()
    clock.t += 3.0  # one TTL without a published heartbeat (Redis away, the process stopped)
    assert not a.fresh()
    lapsed = a.lapse()
    assert {(h.why, h.to_replica) for h in lapsed.lost} == {("heartbeat_lost", None)} and a.owned == frozenset()
    a.beat(clock.t)
    back = a.update(["r-a"], AGENTS[:10], {})
    assert {h.why for h in back.gained} == {"heartbeat_restored"} and a.owned == set(AGENTS[:10])


def test_leaving_hands_each_agent_to_its_next_owner() -> None:
    a = view("r-a", Clock())
    a.update(["r-a", "r-b", "r-c"], AGENTS, {})
    mine = set(a.owned)
    left = a.leave()
    rest = rendezvous.assign(mine, ["r-b", "r-c"])
    assert {(x, h.to_replica) for h in left.lost for x in h.agents} == set(rest.items())
    assert all(h.why == "stopped" for h in left.lost) and a.owned == frozenset()


def test_a_takeover_plans_every_slot_since_the_last_claim_once() -> None:
    s = schedule.Schedule(agent_id="x", tier="whisper", timezone="UTC", every_s=10)
    last = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    now = last + dt.timedelta(seconds=45)
    older, newest = ownership.plan(s, last, now)
    assert older == [last + dt.timedelta(seconds=10 * i) for i in (1, 2, 3)]
    assert newest == last + dt.timedelta(seconds=40)
    assert ownership.plan(s, None, now) == ([], None)  # never ran: nothing missed
    assert ownership.plan(s, now, now) == ([], None)


def test_a_takeover_also_records_the_slots_nobody_claimed_before_the_last_claim() -> None:
    """A replica died holding a slot (in its spool) after it had claimed a later one: the newest
    claim is no watermark, the look back finds the slot; not before the tier's first claim."""
    s = schedule.Schedule(agent_id="x", tier="whisper", timezone="UTC", every_s=10)
    t0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    claimed = {t0 + dt.timedelta(seconds=10 * i) for i in (0, 1, 3, 4, 6)}  # 20 s and 50 s nobody claimed
    last, since = t0 + dt.timedelta(seconds=60), t0 - dt.timedelta(seconds=30)
    key = ("x", "whisper")
    old = ownership.Claims(last={key: last}, since={key: since}, recent={key: claimed}, by_then=frozenset({key}))
    assert old.gaps(s) == [t0 - dt.timedelta(seconds=20), t0 - dt.timedelta(seconds=10), t0 + dt.timedelta(seconds=20), t0 + dt.timedelta(seconds=50)]
    new = ownership.Claims(last={key: last}, since={key: since}, recent={key: claimed})  # its first claim is t0
    assert new.gaps(s) == [t0 + dt.timedelta(seconds=20), t0 + dt.timedelta(seconds=50)]
    older, newest = ownership.plan(s, last, last + dt.timedelta(seconds=25), new.gaps(s))
    assert older == [t0 + dt.timedelta(seconds=20), t0 + dt.timedelta(seconds=50), last + dt.timedelta(seconds=10)]
    assert newest == last + dt.timedelta(seconds=20)
    assert ownership.plan(s, last, last, new.gaps(s)) == ([t0 + dt.timedelta(seconds=20), t0 + dt.timedelta(seconds=50)], None)
    assert ownership.Claims(last={}).gaps(s) == []
    # the look back: a time, or the tier's last slots if they reach further
    assert ownership.look_back(s, last, 30.0) == last - dt.timedelta(seconds=100)
    assert ownership.look_back(s, last, 500.0) == last - dt.timedelta(seconds=500)


def test_an_unchanged_membership_moves_nothing_and_is_not_hashed_again() -> None:
    a = view("r-a", Clock())
    a.update(["r-a", "r-b"], AGENTS, {})
    owners = a.owners
    again = a.update(["r-b", "r-a"], AGENTS, {})
    assert not again.gained and not again.lost and a.owners is owners

