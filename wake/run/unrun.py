"""Every row of a wake that did not run, written here, with its reason, its metric and its log line.

A claimed slot or one-shot leaves exactly one row (`wake.run.claim`); when its wake never ran,
that row is one of these, each a `NotRun` written by one of the functions below:

- `skipped` (busy: another wake held the lease; shutting down; paused; outside the tier's active
  hours) or `missed` (found later than the tier's `misfire_grace_s`) or `failed` (the lease could
  not be taken after the claim): `write`, unfenced (its writer holds no lease, and the slot claim
  already makes it the slot's only row);
- `failed`, the lease lost before the wake's row could be written: `lost`;
- `aborted`, the wake's fence went stale before its first write: `stale`, under a lock on the claim;
- `failed`, its claimer died before writing the row, found by the next daemon starting on its
  host (`dead_claims`) or by any replica once a claimer elsewhere stopped beating (`claimer_died`,
  `close_unrecorded`);
- `missed`, PostgreSQL was unreachable (`missed`, from the daemon's spool) or the slot was never
  fired here (coalesced away, or its owner died: `never_fired`), claimed in the same transaction.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from ledgers import dead_processes, introspection, slots, unrecorded
from ledgers.vocab import Status, Tier, Trigger
from wake import logs
from wake.context import WakeRequest
from wake.observe import metrics, tracing
from wake.run import incident_policy, settle
from wake.run.session import Session

log = logs.get("wake.unrun")

DIED_AFTER_CLAIM = "claimed, never run: its process {claimer} died after claiming the slot, before the slot's row was written"
DIED_AFTER_ONESHOT = "claimed, never run: its process {claimer} died after claiming the one-shot, before its row was written"
STALE_BEFORE_ROW = "claimed, never recorded: the wake's lease was lost (fence {fence}) before its row was written"
LOST_BEFORE_ROW = "lease lost before the row: a newer holder's fence refused this wake's row; the slot was not run"
UNRECORDED = "claimed, never run: its process {claimer} {how} after claiming it, before its row was written"
MISSED = "missed: store_unreachable"
DEAD_CLAIM_LOOKBACK = dt.timedelta(days=1)  # how far back a starting daemon looks for its host's dead claims (one range scan per tier)


@dataclass(frozen=True, kw_only=True)
class NotRun:
    """One wake that did not run: its row's fields, and how it is counted (`code`, a
    `wake_wakes_skipped_total` reason; None: not counted) and logged (`extra`)."""

    wake_id: uuid.UUID
    agent_id: str
    tier: Tier
    trigger: Trigger
    scheduled_for: dt.datetime | None
    started_at: dt.datetime
    status: Status
    note: str | None = None
    error: str | None = None
    code: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, request: WakeRequest, status: Status, reason: str, *, at: dt.datetime) -> NotRun:
        """A claimed request's: a `skipped` or `missed` one says why in its note, a `failed` one in its error."""
        held = status in (Status.skipped, Status.missed)
        return cls(
            wake_id=request.wake_id, agent_id=request.agent_id, tier=request.tier, trigger=request.trigger,
            scheduled_for=request.scheduled_for, started_at=at, status=status, note=f"{status}: {reason}" if held else None,
            error=None if held else reason, code="missed" if status == Status.missed else metrics.reason_code(reason),
            extra={"reason": reason} if held else {},
        )

    def row(self, session: Session) -> introspection.WakeRow:
        return introspection.WakeRow(
            wake_id=self.wake_id, agent_id=self.agent_id, tier=self.tier, trigger=self.trigger, scheduled_for=self.scheduled_for,
            started_at=self.started_at, manifest_root=None, **settle.provenance(session.config), note=self.note, error=self.error,
            trace_id=tracing.trace_id(),  # the wake's own trace when its claim wrote the row (another replica's sweep traces none)
        )


async def _incident(conn: Any, session: Session, n: NotRun) -> None:
    """The row's part in its tier's incidents (`wake.run.incident_policy`)."""
    await incident_policy.witness(conn, session.config, wake_id=n.wake_id, agent_id=n.agent_id, tier=n.tier, status=n.status,
                            error=n.error, note=n.note, at=n.started_at)


def _logged(n: NotRun, chain: str | None) -> None:
    """The row's metric and its one log line, named by its status."""
    if n.code is not None:
        metrics.observe_skipped(n.agent_id, n.tier, n.code)
    where = {"agent": n.agent_id, "tier": n.tier, "wake_id": str(n.wake_id),
             "scheduled_for": n.scheduled_for.isoformat() if n.scheduled_for else None, "chain": chain, **n.extra}
    if n.status == Status.missed:
        log.warning("wake.missed", **where)
    elif n.status == Status.skipped:
        log.info("wake.skipped", **where)
    elif n.status == Status.aborted:
        log.warning("wake.aborted", **where)
    else:
        log.error("wake.failed", error=n.error, **where)


async def write(session: Session, n: NotRun) -> str | None:
    """The row of a claimed slot or one-shot that did not run, unfenced."""
    async with session.stores.pg_conn() as conn, conn.transaction():
        chain = await introspection.insert(conn, n.row(session), status=n.status)
        await _incident(conn, session, n)
    _logged(n, chain)
    return chain


async def lost(session: Session, request: WakeRequest, *, now: dt.datetime, reason: str = LOST_BEFORE_ROW) -> bool:
    """The row of a claimed slot whose wake lost its lease before it could write its own (its
    process was suspended between the claim and the row, and a newer holder's fence refused the
    row): `failed` (nothing ran, so there is no manifest to close `abandoned`). False when the slot
    has its row already."""
    async with session.stores.pg_conn() as conn:
        if await introspection.get(conn, request.wake_id) is not None:
            return False
    try:
        await write(session, NotRun.of(request, Status.failed, reason, at=now))
    except asyncpg.UniqueViolationError:  # its claimer, only slow, wrote it since: the slot has its one row
        return False
    return True


async def _if_none(session: Session, claim: dead_processes.ClaimWithoutRow, n: NotRun) -> str | None:
    """Under a lock on the claim, unless the slot or one-shot has its row by then."""
    async with session.stores.pg_conn() as conn, conn.transaction():
        chain = await dead_processes.record_claim_row(conn, claim, n.row(session), n.status)
        if chain is not None:
            await _incident(conn, session, n)
    if chain is not None:
        _logged(n, chain)
    return chain


async def stale(session: Session, request: WakeRequest, *, claimed_by: str, fence: int, now: dt.datetime) -> None:
    """A claimed slot or one-shot whose wake wrote no row (its fence went stale before the first
    write: a process suspended past its lease's TTL, say) still gets its one row: `aborted`."""
    reason = STALE_BEFORE_ROW.format(fence=fence)
    claim = dead_processes.ClaimWithoutRow(
        agent_id=request.agent_id, tier=request.tier, scheduled_for=request.scheduled_for, trigger=request.trigger, claimed_by=claimed_by,
        claimed_at=now, wake_id=request.wake_id,
    )
    n = NotRun(
        wake_id=request.wake_id, agent_id=request.agent_id, tier=request.tier, trigger=request.trigger, scheduled_for=request.scheduled_for,
        started_at=now, status=Status.aborted, error=reason, extra={"reason": reason},
    )
    await _if_none(session, claim, n)


async def dead_claims(session: Session, *, host: str, alive: Callable[[int], bool], now: dt.datetime) -> int:
    """At a daemon's start: the slots and one-shots claimed (in the last `DEAD_CLAIM_LOOKBACK`) by
    a process on this host that is dead and that have no row get their one row, `failed`, with the
    claim's wake id; returns how many were written. Only a dead claimer's: a live one (even a
    suspended one) writes its own row."""
    tiers = [(a, str(t)) for a, agent in session.config.agents.items() for t in agent.tiers]
    async with session.stores.pg_conn() as conn:
        dead = await dead_processes.dead_claims(conn, host, tiers, now - DEAD_CLAIM_LOOKBACK, alive)
    written = 0
    for claim in dead:
        reason = (DIED_AFTER_CLAIM if claim.scheduled_for is not None else DIED_AFTER_ONESHOT).format(claimer=claim.claimed_by)
        n = NotRun(
            wake_id=claim.wake_id, agent_id=claim.agent_id, tier=Tier(claim.tier), trigger=Trigger(claim.trigger),
            scheduled_for=claim.scheduled_for, started_at=claim.claimed_at, status=Status.failed, error=reason, code="died_after_claim",
            extra={"closed_by": "start-up: its claimer is dead on this host"},
        )
        written += await _if_none(session, claim, n) is not None
    return written


async def missed(
    session: Session, request: WakeRequest, *, failed_at: dt.datetime, error: str, outage_since: dt.datetime | None, by: str, now: dt.datetime,
) -> str | None:
    """A slot that got no row because PostgreSQL was unreachable, written once it answers: `missed`,
    unless it already has its one row. The slot claim decides, across replicas, exactly as for a
    slot that runs: this replica claims it now, or finds its own earlier claim without a row; a
    slot claimed by another replica is that replica's to record. Returns the row's chain link, or
    None when nothing needed writing."""
    assert request.scheduled_for is not None
    since = min(outage_since or failed_at, failed_at)
    outage_s = (now - since).total_seconds()
    note = (f"{MISSED}: postgres unreachable from {since:%Y-%m-%dT%H:%M:%S%z} until it answered again at "
            f"{now:%Y-%m-%dT%H:%M:%S%z} ({outage_s:.0f} s); the slot was not run")
    async with session.stores.pg_conn() as conn, conn.transaction():
        wake_id = request.wake_id
        won = await slots.claim(
            conn, agent_id=request.agent_id, tier=request.tier, scheduled_for=request.scheduled_for, trigger=request.trigger,
            claimed_by=by, claimed_at=now, wake_id=wake_id,
        )
        metrics.observe_claim(won)
        if not won:
            holder = await slots.holder(conn, request.agent_id, request.tier, request.scheduled_for)
            if holder is None or holder.claimed_by != by or await introspection.get(conn, holder.wake_id) is not None:
                return None
            wake_id = holder.wake_id
        n = NotRun(
            wake_id=wake_id, agent_id=request.agent_id, tier=request.tier, trigger=request.trigger, scheduled_for=request.scheduled_for,
            started_at=failed_at, status=Status.missed, note=note, error=error, code="store_unreachable",
            extra={"reason": "store_unreachable", "failed_at": since.isoformat(), "outage_s": round(outage_s, 1)},
        )
        chain = await introspection.insert(conn, n.row(session), status=n.status)
        await _incident(conn, session, n)
    _logged(n, chain)
    return chain


async def never_fired(session: Session, request: WakeRequest, reason: str, *, by: str, now: dt.datetime) -> bool:
    """Claim a slot nobody ran and record it `missed`, in one transaction; False when the slot was
    claimed already (it has, or will have, its own row)."""
    assert request.scheduled_for is not None
    async with session.stores.pg_conn() as conn, conn.transaction():
        won = await slots.claim(
            conn, agent_id=request.agent_id, tier=request.tier, scheduled_for=request.scheduled_for, trigger=request.trigger,
            claimed_by=by, claimed_at=now, wake_id=request.wake_id,
        )
        metrics.observe_claim(won)
        if not won:
            return False
        n = NotRun.of(request, Status.missed, reason, at=now)
        chain = await introspection.insert(conn, n.row(session), status=n.status)
        await _incident(conn, session, n)
    _logged(n, chain)
    return True


# -- claims whose claimer died elsewhere -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Liveness:
    """What this replica knows of the others: its host, which pids are alive on it, the replica
    ids that beat (None: Redis could not be read, so only this host's dead pids are known), and
    how long a heartbeat lives."""

    host: str
    alive: Callable[[int], bool]
    live_replicas: Collection[str] | None
    heartbeat_ttl_s: float


def dead_because(claimed_by: str, claimed_at: dt.datetime | None, now: dt.datetime, live: Liveness) -> str | None:
    """How the claimer is known to be dead (the row says it), or None when it may be alive.
    `claimed_at` None: the claimer beat before it could claim (a trigger's taker), so a missing
    heartbeat is enough."""
    host, _, rest = claimed_by.partition(":")
    pid = rest.partition(":")[0]
    if host == live.host and pid.isdigit():
        return None if live.alive(int(pid)) else "died on this host"
    if live.live_replicas is None or claimed_by in live.live_replicas:
        return None
    return "stopped beating" if claimed_at is None or (now - claimed_at).total_seconds() > live.heartbeat_ttl_s else None


def unrecorded_row(
    *, wake_id: uuid.UUID, agent_id: str, tier: Tier, trigger: Trigger, started_at: dt.datetime, claimer: str, how: str,
) -> NotRun:
    """A wake a dead claimer took and never recorded: `failed` (claimed, never run), naming the claimer."""
    return NotRun(
        wake_id=wake_id, agent_id=agent_id, tier=tier, trigger=trigger, scheduled_for=None, started_at=started_at, status=Status.failed,
        error=UNRECORDED.format(claimer=claimer, how=how), code="died_after_claim",
        extra={"trigger": trigger, "claimed_by": claimer, "closed_by": "unrecorded: its claimer died before its row"},
    )


async def claimer_died(session: Session, n: NotRun, *, claimer: str, oneshot: bool) -> str | None:
    """Write a dead claimer's row unless the wake has one (a one-shot's under its locked claim)."""
    async with session.stores.pg_conn() as conn, conn.transaction():
        chain = await unrecorded.record_unrecorded(conn, n.row(session), claimed_by=claimer if oneshot else None)
        if chain is not None:
            await _incident(conn, session, n)
    if chain is not None:
        _logged(n, chain)
    return chain


async def close_unrecorded(session: Session, live: Liveness, now: dt.datetime) -> list[NotRun]:
    """Give each one-shot whose claimer is dead its `failed` row; returns the rows written."""
    async with session.stores.pg_conn() as conn:
        claimed = await unrecorded.unrecorded_oneshots(conn, now)
    written = []
    for shot in claimed:
        how = dead_because(shot.claimed_by, shot.claimed_at, now, live)
        if how is None or shot.agent_id not in session.config.agents:
            continue
        n = unrecorded_row(
            wake_id=shot.wake_id, agent_id=shot.agent_id, tier=Tier(shot.tier), trigger=Trigger.at, started_at=shot.claimed_at,
            claimer=shot.claimed_by, how=how,
        )
        if await claimer_died(session, n, claimer=shot.claimed_by, oneshot=True) is not None:  # else recorded meanwhile
            written.append(n)
    return written
