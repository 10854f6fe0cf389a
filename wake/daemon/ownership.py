"""Which replica schedules which agent: rendezvous hashing over the replicas' Redis heartbeats.

Every replica reads the same membership (the heartbeats in Redis, `control.live_replicas`, less
the ones that say they are leaving) and gives each agent to the member with the highest weight
`hash(replica, agent)` (highest-random-weight, or rendezvous, hashing). No replica tells another
anything: they agree because they read the same keys and compute the same function. A replica's
APScheduler holds only the jobs of the agents it owns; the slot claim (`wake_slots`) stays the
arbiter, so two replicas that briefly both think they own an agent (one saw a membership change a
tick before the other) still run each slot once.

Handover, by why (the `why` of `wake.handover`):

- `start`: a replica whose first membership read finds no other replica takes every agent, with
  the start's catch-up rules (the cluster is starting, perhaps after a gap);
- `resumed`: a replica whose first read finds no other member, but the cluster's mark
  (`wake:cluster`, the newest member's id, kept an hour) naming another replica, takes every
  agent as a takeover: the cluster was running a moment ago (the others' heartbeats expired in a
  Redis outage they are still coming back from, or the only replica crashed), so the slots since
  each agent's last claim are its to record, not the start's to skip. The last member to stop on
  purpose removes the mark, so a cluster stopped on purpose starts again with the start's rules;
- `joined`: a replica that appears beside others takes its share from them at once (they drop it
  at their next heartbeat), and catches up as a takeover does: its owner may just have died;
- `stopped`: a replica that stops (SIGTERM) publishes itself `leaving` and drops out of the
  membership at once, so the others take its agents at their next heartbeat, while it drains;
- `expired`: a replica that died (kill -9, SIGSTOP, a partition) stops being a member when its
  heartbeat key expires (`3 × heartbeat_s`); the others take its agents at their next heartbeat
  after that. The stated takeover bound is therefore the heartbeat TTL plus one heartbeat;
- `heartbeat_lost` / `heartbeat_restored`: a replica that could not publish its heartbeat for a
  whole TTL (Redis away, its process suspended) owns nothing until it can again: the others may
  have taken its agents, and it must not run beside them on a stale view (`Ownership.fresh`);
- `configured` / `unconfigured`: an agent added to or removed from the config (SIGHUP).

An agent taken over after the start (every why but `start`) has its slots since the last claimed
one caught up (`take_over`): each older one is recorded `missed` (through the slot claim, so a
slot the old owner did claim keeps its own row), and the newest runs as a late scheduled slot, so
the tier's `misfire_grace_s` decides whether it still runs or is recorded `missed`. It also looks
`LOOK_BACK_TTLS` heartbeat TTLs or `LOOK_BACK_FIRES` slots back for slots nobody claimed before a later one was, and records
those `missed` too: the newest claim is not a watermark, since a replica that died (kill -9)
may have held an older slot in its spool, or been between a takeover's newest slot and its
older ones, when it went. A claim there with no row (its claimer killed between the claim and
the wake's first row) gets its row, `failed`, once its claimer's lease has had time to expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import redis.asyncio as aioredis

from ledgers import handover
from ledgers.vocab import Tier, Trigger
from wake import keys, logs
from wake.context import WakeRequest
from wake.daemon import control, schedule
from wake.daemon.rendezvous import assign, members_of
from wake.errors import StoreUnavailable
from wake.observe import metrics
from wake.run import unrun
from wake.run.session import Session

log = logs.get("wake.ownership")

LEFT_KEY = keys.REPLICA_LEFT
# How many agents a `wake.handover` event names (it says how many there were in all).
NAMED_AGENTS = 50
# The most slots of one (agent, tier) a takeover records `missed`: a longer gap keeps its newest.
MAX_MISSED_PER_TIER = 1000
# The replicas' heartbeat key lives this many heartbeats (`wake.daemon.service`).
TTL_BEATS = 3
# A takeover also looks this many heartbeat TTLs back for slots nobody claimed before a later one was.
LOOK_BACK_TTLS = 10
LOOK_BACK_FIRES = 10
CLUSTER_KEY = keys.CLUSTER
# How long the cluster's mark outlives the last heartbeat of a member that did not stop on purpose.
CLUSTER_MEMORY_S = 3600.0


@dataclass(frozen=True, kw_only=True)
class Handover:
    """Agents that moved from one replica to another (either None: nobody), and why."""

    agents: tuple[str, ...]
    from_replica: str | None
    to_replica: str | None
    why: str

    def log(self, direction: str) -> None:
        log.info(
            "wake.handover", direction=direction, **{"from": self.from_replica, "to": self.to_replica}, why=self.why,
            count=len(self.agents), agents=list(self.agents[:NAMED_AGENTS]),
        )
        metrics.observe_handover(direction, self.why, len(self.agents))


@dataclass(kw_only=True)
class Change:
    """What one membership read changed for this replica."""

    gained: list[Handover] = field(default_factory=list)
    lost: list[Handover] = field(default_factory=list)

    def gained_agents(self, *, but: str | None = None) -> list[str]:
        return [a for h in self.gained if h.why != but for a in h.agents]

    def lost_agents(self) -> list[str]:
        return [a for h in self.lost for a in h.agents]

    def log(self) -> None:
        for h in self.lost:
            h.log("lost")
        for h in self.gained:
            h.log("gained")


def _grouped(moves: Iterable[tuple[str, str | None, str | None, str]]) -> list[Handover]:
    groups: dict[tuple[str | None, str | None, str], list[str]] = defaultdict(list)
    for agent, src, dst, why in moves:
        groups[(src, dst, why)].append(agent)
    return [Handover(agents=tuple(sorted(a)), from_replica=s, to_replica=d, why=w) for (s, d, w), a in sorted(groups.items(), key=str)]


@dataclass(kw_only=True)
class Ownership:
    """This replica's view: the membership it last read, every agent's owner, its own share, and
    when it last published its heartbeat (a view older than the heartbeat TTL is not acted on)."""

    replica_id: str
    ttl_s: float
    monotonic: Callable[[], float] = time.monotonic
    members: tuple[str, ...] = ()
    owners: dict[str, str] = field(default_factory=dict)
    owned: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()  # the configured agents the owners were computed for
    beat_at: float | None = None
    assigned: bool = False  # a first share was taken
    resumed: bool = False  # before the first share: the cluster's mark names another replica
    lapsed: bool = False  # dropped everything for a stale heartbeat

    def fresh(self) -> bool:
        """True while this replica's last published heartbeat is younger than its TTL: only then
        is it a member in the others' eyes, and only then does it fire its jobs."""
        return self.beat_at is not None and self.monotonic() - self.beat_at < self.ttl_s

    def beat(self, at: float) -> None:
        """A heartbeat published at monotonic `at` (taken before the write was sent)."""
        self.beat_at = at

    def lapse(self) -> Change:
        """The heartbeat went stale: own nothing until it is published again."""
        change = Change(lost=_grouped((a, self.replica_id, None, "heartbeat_lost") for a in sorted(self.owned)))
        self.owned, self.lapsed = frozenset(), True
        return change

    def update(self, members: Sequence[str], agents: Iterable[str], left: Mapping[str, bool]) -> Change:
        """Take the membership just read. `left`: for each member of the previous view no longer
        there, whether it said it was stopping (else its heartbeat expired)."""
        agents = list(agents)
        members = tuple(sorted(set(members) | {self.replica_id}))  # a fresh replica is a member, whatever the read raced
        known = frozenset(agents)
        if self.assigned and not self.lapsed and members == self.members and known == self.agents:
            return Change()  # nothing moved: hashing every agent again costs ~2 s at 100,000 agents x 10 replicas
        self.agents = known
        old_members, old_owners = set(self.members), self.owners
        owners = assign(agents, members)
        mine = frozenset(a for a, r in owners.items() if r == self.replica_id)
        gained, lost = [], []
        others = tuple(m for m in members if m != self.replica_id)
        before = assign(mine, others) if not self.assigned and others else {}
        for agent in sorted(mine - self.owned):
            src = old_owners.get(agent) or before.get(agent)
            if not self.assigned:
                why = "joined" if others else "resumed" if self.resumed else "start"
            elif self.lapsed:
                why = "heartbeat_restored"
            elif src is None:
                why = "configured"
            elif src not in members:
                why = "stopped" if left.get(src) else "expired"
            else:
                why = "rebalanced"
            gained.append((agent, None if src == self.replica_id else src, self.replica_id, why))
        for agent in sorted(self.owned - mine):
            dst = owners.get(agent)
            why = "unconfigured" if dst is None else "joined" if dst not in old_members else "rebalanced"
            lost.append((agent, self.replica_id, dst, why))
        self.members, self.owners, self.owned = members, owners, mine
        self.assigned, self.lapsed = True, False
        return Change(gained=_grouped(gained), lost=_grouped(lost))

    def leave(self) -> Change:
        """This replica stops: everything it owns goes to the owners the rest of the membership gives."""
        rest = tuple(m for m in self.members if m != self.replica_id)
        owners = assign(self.owned, rest)
        change = Change(lost=_grouped((a, self.replica_id, owners.get(a), "stopped") for a in sorted(self.owned)))
        self.owned = frozenset()
        return change


async def read_membership(redis: aioredis.Redis, previous: Sequence[str]) -> tuple[tuple[str, ...], dict[str, bool]]:
    """The membership now, and for each member of `previous` that is gone, whether it left on
    purpose (it published `leaving`, or its leaving mark is still there) or its heartbeat expired."""
    replicas = await control.live_replicas(redis)
    members = members_of(replicas)
    leaving = {r.replica_id for r in replicas if r.leaving}
    gone = [m for m in previous if m not in members]
    left: dict[str, bool] = {}
    if gone:
        marks = await redis.mget([LEFT_KEY.format(replica_id=m) for m in gone])
        left = {m: m in leaving or mark is not None for m, mark in zip(gone, marks, strict=True)}
    return members, left


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


async def cluster_resumed(redis: aioredis.Redis, replica_id: str) -> bool:
    """True when the cluster's mark names another replica: a member beat within `CLUSTER_MEMORY_S`
    and did not stop on purpose as the last one."""
    mark = _text(await redis.get(CLUSTER_KEY))
    return mark is not None and mark != replica_id


async def mark_member(redis: aioredis.Redis, replica_id: str) -> None:
    """This replica is a member now: the cluster's mark names it."""
    await redis.set(CLUSTER_KEY, replica_id, px=int(CLUSTER_MEMORY_S * 1000))


async def forget_cluster(redis: aioredis.Redis, replica_id: str) -> None:
    """The last member stops on purpose: the mark goes (if this replica wrote the newest)."""
    if _text(await redis.get(CLUSTER_KEY)) == replica_id:
        await redis.delete(CLUSTER_KEY)


async def mark_left(redis: aioredis.Redis, replica_id: str, ttl_s: float) -> None:
    """Leave a mark that this replica stopped on purpose (read by `read_membership`), then go."""
    await redis.set(LEFT_KEY.format(replica_id=replica_id), "1", px=max(1, int(ttl_s * 1000)))


# -- taking over an agent's slots -------------------------------------------------------------------

RunSlot = Callable[[schedule.Schedule, dt.datetime, float], Awaitable[None]]
Spawn = Callable[[Coroutine[Any, Any, None], str], object]
Spool = Callable[[WakeRequest, str], None]


@dataclass(frozen=True, kw_only=True)
class Claims:
    """What a takeover reads of its tiers' claims: the newest claimed slot of each, the slots
    claimed since `since` (the look back), and which tiers had a claim by then."""

    last: Mapping[tuple[str, str], dt.datetime]
    since: Mapping[tuple[str, str], dt.datetime] = field(default_factory=dict)
    recent: Mapping[tuple[str, str], set[dt.datetime]] = field(default_factory=dict)
    rowless: Mapping[tuple[str, str], list[handover.Rowless]] = field(default_factory=dict)
    by_then: frozenset[tuple[str, str]] = frozenset()

    def gaps(self, sched: schedule.Schedule) -> list[dt.datetime]:
        """The slots of the look back, before the tier's newest claim, that nobody claimed: a
        replica that died holding them (in its spool, or between a takeover's newest slot and its
        older ones). Not before the tier's first claim: an agent added lately missed nothing."""
        key = (sched.agent_id, sched.tier)
        last, recent, look_back = self.last.get(key), self.recent.get(key, set()), self.since.get(key)
        if last is None or look_back is None:
            return []
        since = look_back if key in self.by_then else min(recent, default=last)
        return [s for s in schedule.fires_between(sched, since, last) if s not in recent and s != last]


def plan(
    sched: schedule.Schedule, last: dt.datetime | None, now: dt.datetime, gaps: Sequence[dt.datetime] = (),
) -> tuple[list[dt.datetime], dt.datetime | None]:
    """The slots of a taken-over tier since its last claimed one: the older ones (to record
    `missed`, at most `MAX_MISSED_PER_TIER`, newest kept), with the `gaps` before it nobody
    claimed, and the newest (to run late), if any. A tier that never ran has missed nothing."""
    if last is None:
        return [], None
    fires = list(schedule.fires_between(sched, last, now))
    if not fires:
        return list(gaps)[-MAX_MISSED_PER_TIER:], None
    older = [*gaps, *fires[:-1]]
    if len(older) > MAX_MISSED_PER_TIER:
        log.warning("handover.missed_clipped", agent=sched.agent_id, tier=sched.tier, slots=len(older), kept=MAX_MISSED_PER_TIER)
        older = older[-MAX_MISSED_PER_TIER:]
    return older, fires[-1]


async def record_missed(session: Session, sched: schedule.Schedule, slot: dt.datetime, reason: str, *, by: str, now: dt.datetime) -> bool:
    """A slot nobody ran, claimed and recorded `missed` (`wake.run.unrun.never_fired`); False when it
    was claimed already (it has, or will have, its own row)."""
    request = WakeRequest(agent_id=sched.agent_id, tier=Tier(sched.tier), trigger=Trigger.schedule, scheduled_for=slot)
    return await unrun.never_fired(session, request, reason, by=by, now=now)


# What a PostgreSQL that fails or does not answer in time raises through the pool.
PG_FAILURES: tuple[type[BaseException], ...] = (StoreUnavailable, TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
                                               asyncpg.InternalClientError)
# How often a takeover asks again for the last claimed slots when PostgreSQL does not answer.
LAST_CLAIMED_TRIES = 30


def look_back(sched: schedule.Schedule, at: dt.datetime, look_back_s: float) -> dt.datetime:
    """How far back a takeover looks for a tier's unclaimed slots: `look_back_s`, or its last
    `LOOK_BACK_FIRES` slots, whichever reaches further (a slow tier's gap is a few slots old)."""
    t = at - dt.timedelta(seconds=look_back_s)
    slot: dt.datetime | None = at
    for _ in range(LOOK_BACK_FIRES):
        slot = schedule.fire_at_or_before(sched, slot - dt.timedelta(microseconds=1)) if slot is not None else None
    return min(t, slot) if slot is not None else t


async def _claims(session: Session, scheds: Sequence[schedule.Schedule], since: dict[tuple[str, str], dt.datetime]) -> Claims | None:
    agents = sorted({s.agent_id for s in scheds})
    for attempt in range(LAST_CLAIMED_TRIES):
        try:
            async with session.stores.pg_conn() as conn:
                last = await handover.last_claimed(conn, agents)
                if not since:
                    return Claims(last=last)
                recent, rowless = await handover.claimed_since(conn, since)
                by_then = await handover.claimed_by_then(conn, since)
                return Claims(last=last, since=since, recent=recent, rowless=rowless, by_then=frozenset(by_then))
        except PG_FAILURES as exc:
            log.warning("handover.read_failed", agents=len(agents), attempt=attempt + 1, error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
            await asyncio.sleep(1.0)
    return None


async def take_over(
    session: Session, scheds: Sequence[schedule.Schedule], handovers: Mapping[str, Handover], *, by: str,
    now: Callable[[], dt.datetime], run_slot: RunSlot, spawn: Spawn, spool: Spool, look_back_s: float = 0.0,
    stop: asyncio.Event, members: Collection[str] = (),
) -> int:
    """Catch up the slots of tiers this replica just took over: the newest of each handed to
    `spawn` to run late (waiting out its jitter first, if it is still ahead), then the older ones
    recorded `missed`; one PostgreSQL refuses or holds up (a suspended replica's open claim of it)
    goes to `spool`, which records it once PostgreSQL answers; then the claims without a row whose
    claimer is gone (`_close_rowless`). Once `stop` is set, nothing waits: a slot still sleeping out
    its jitter ends unclaimed (the next owner catches it up). Returns how many rows this wrote."""
    if not scheds:
        return 0
    at = now()
    since = {(s.agent_id, s.tier): look_back(s, at, look_back_s) for s in scheds} if look_back_s > 0 else {}
    claims = await _claims(session, scheds, since)
    if claims is None:
        log.error("handover.catch_up_lost", agents=len({s.agent_id for s in scheds}))
        return 0
    at = now()
    plans = [(sched, *plan(sched, claims.last.get((sched.agent_id, sched.tier)), at, claims.gaps(sched))) for sched in scheds]
    for sched, _, newest in plans:
        if newest is not None:
            spawn(_late(sched, newest, now, run_slot, stop), f"taken-over:{sched.agent_id}/{sched.tier}:{newest.isoformat()}")
    recorded = 0
    for sched, older, _ in plans:
        h = handovers.get(sched.agent_id)
        reason = f"its owner {h.from_replica or 'unknown'} {h.why}; taken over by {by}" if h else f"taken over by {by}"
        for slot in older:
            try:
                recorded += await record_missed(session, sched, slot, reason, by=by, now=now())
            except PG_FAILURES as exc:
                request = WakeRequest(agent_id=sched.agent_id, tier=Tier(sched.tier), trigger=Trigger.schedule, scheduled_for=slot)
                spool(request, f"{reason}; {type(exc).__name__}: {exc}")
    return recorded + await _close_rowless(session, scheds, claims, by=by, members=set(members) | {by}, at=at, now=now, stop=stop)


ROWLESS = "claimed by {claimed_by}, which died between the claim and the wake's row (found by {by}); the slot was not run"


async def _close_rowless(
    session: Session, scheds: Sequence[schedule.Schedule], claims: Claims, *, by: str, members: set[str], at: dt.datetime,
    now: Callable[[], dt.datetime], stop: asyncio.Event,
) -> int:
    """The one row of each claimed slot of the look back whose claimer is gone from the membership
    and whose lease has had time to expire, and that has no row: `failed`, under the claim's wake
    id (a claimer that was only suspended finds it there when it wakes: its own row is refused by
    the newer fence, and `unrun.lost` finds the slot has its row)."""
    settle = dt.timedelta(seconds=session.config.daemon.lease_ttl_s)
    written = 0
    for sched in scheds:
        for lost in claims.rowless.get((sched.agent_id, sched.tier), []):
            if lost.claimed_by in members:
                continue  # a live claimer is about to write it
            wait_s = (lost.claimed_at + settle - at).total_seconds()
            if wait_s > 0 and await stopped_within(stop, wait_s):  # one just gone may still hold its lease: wait it out first
                return written  # stopping: the agent's next owner finds it again, within its look back
            request = WakeRequest(agent_id=sched.agent_id, tier=Tier(sched.tier), trigger=Trigger.schedule, scheduled_for=lost.scheduled_for,
                                  wake_id=lost.wake_id)
            try:
                written += await unrun.lost(session, request, now=now(), reason=ROWLESS.format(claimed_by=lost.claimed_by, by=by))
            except PG_FAILURES as exc:  # the next takeover of the agent finds it again, within its look back
                log.warning("handover.rowless_failed", agent=sched.agent_id, wake_id=str(lost.wake_id),
                            error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
    return written


async def stopped_within(stop: asyncio.Event, wait_s: float) -> bool:
    """Sleep `wait_s`, or less if `stop` is set first: True when it was (a stopping replica runs
    nothing more, so a task sleeping out a jitter ends at once instead of holding up the drain)."""
    if stop.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=wait_s)
    return stop.is_set()


async def _late(sched: schedule.Schedule, slot: dt.datetime, now: Callable[[], dt.datetime], run_slot: RunSlot, stop: asyncio.Event) -> None:
    delay = schedule.jitter_delay_s(sched, slot)
    ahead = (slot + dt.timedelta(seconds=delay) - now()).total_seconds()
    if ahead > 0 and await stopped_within(stop, ahead):
        return  # never claimed: the agent's next owner catches it up
    await run_slot(sched, slot, delay)
