"""Steps 1-3 of a wake, in one place: claim the slot, take the lease and fence, close what a dead
holder left, run the wake; or record why not.

`wake daemon`'s scheduled slots and catch-ups, its `wake trigger` requests and `wake up` all come
through `run`. What differs between them is data on the call: a request with a slot is claimed
in `wake_slots` first (the loser runs nothing); `wait_s` is how long a busy agent is waited for;
`on_running` lets the daemon register the wake and answer the operator.

Taking the lease makes this caller the agent's only live writer, so it is also the moment to close
what a dead holder left behind: every row of the agent still `started` belongs to a process whose
lease is gone (it died, or lost the lease and can no longer write past the fence), and is closed
`abandoned` under the new fence.

Every claimed slot leaves exactly one row: the wake's own, or a `skipped` one (busy, shutting
down, paused, outside the tier's active hours), a `missed` one (found later than the tier's `misfire_grace_s`), or a `failed` one
(the lease could not be taken after the claim, or was lost before the wake's row could be
written: `record_lost`; or its claimer died before writing the row, found
by the next daemon starting on its host: `record_dead_claims`, or by any replica once a claimer
elsewhere stopped beating: `wake.run.orphans`), or an `aborted` one (the wake's
fence went stale before its first write: `_row_if_none`). A one-shot (`wake at`, trigger `at`) is claimed
on its own `wake_oneshots` row instead of a slot, and then follows the same path.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import socket
import zoneinfo
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from ledgers import controls, dead_processes, introspection, slots
from ledgers.vocab import Status, Tier, Trigger
from wake import clock, logs
from wake.config import Config, hours
from wake.context import WakeRequest
from wake.errors import AgentBusy, LeaseBusy, LeaseLost, StoreUnavailable
from wake.observe import metrics
from wake.run import cycle, settle
from wake.run.session import Session
from wake.stores import Stores, lease

log = logs.get("wake.claim")

ABANDONED = "abandoned: its process died or lost the agent's lease before settling"
SHUTTING_DOWN = "shutting down"
DIED_AFTER_CLAIM = "claimed, never run: its process {claimer} died after claiming the slot, before the slot's row was written"
DIED_AFTER_ONESHOT = "claimed, never run: its process {claimer} died after claiming the one-shot, before its row was written"
STALE_BEFORE_ROW = "claimed, never recorded: the wake's lease was lost (fence {fence}) before its row was written"
DEAD_CLAIM_LOOKBACK = dt.timedelta(days=1)  # how far back a starting daemon looks for its host's dead claims (one range scan per tier)
BUSY_HINT = "; try again when it has settled"


def owner() -> str:
    """The readable prefix of lease tokens this process takes: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(kw_only=True)
class Timing:
    """Where one wake's time went before and around it (the daemon's benchmark reads these)."""

    claim_ms: float = 0.0
    lease_ms: float = 0.0
    release_ms: float = 0.0
    wake_ms: float = 0.0
    running_at: dt.datetime | None = None
    jitter_s: float = 0.0  # the slot's deterministic delay, waited before the claim
    outcome: str = ""


@dataclass(frozen=True, kw_only=True)
class Claim:
    """Who claims a request's slot; None on `run` means the request has no slot to claim."""

    by: str  # the replica id recorded in `wake_slots`


OnRunning = Callable[[WakeRequest, lease.Lease], Awaitable[None]]


def _log_abandoned(agent_id: str, fence: int, closed: list[introspection.AbandonedRow]) -> None:
    for row in closed:
        metrics.observe_abandoned(agent_id, row.tier)
        log.warning(
            "wake.abandoned", agent=agent_id, wake_id=str(row.wake_id), host=row.host, pid=row.pid, fence=row.fence,
            closed_by_fence=fence,
        )


@contextlib.asynccontextmanager
async def agent_lease(
    config: Config, stores: Stores, agent_id: str, *, owner: str, guarded: asyncio.Task[Any] | None = None, wait_s: float = 0.0,
    floor: int | None = None, taken: lease.Lease | None = None,
) -> AsyncIterator[lease.Lease]:
    """Hold the agent's lease (TTL `daemon.lease_ttl_s`, renewed every TTL/3; losing it cancels
    `guarded`), with the agent's abandoned rows closed in the statement that records the fence.
    Raises `LeaseBusy` after `wait_s`. `floor`: the agent's newest fence, if just read. `taken`:
    the lease `take_lease` took in the slot claim's transaction."""
    ttl_ms = int(config.daemon.lease_ttl_s * 1000)
    async with lease.held(
        stores, agent_id, ttl_ms=ttl_ms, owner=owner, guarded=guarded, wait_s=wait_s, floor=floor, abandon=ABANDONED, taken=taken,
    ) as held:
        _log_abandoned(agent_id, held.fence, held.abandoned)
        yield held


async def record_not_run(session: Session, request: WakeRequest, reason: str, *, status: Status = Status.skipped, now: dt.datetime) -> None:
    """The row of a claimed slot that did not run: `skipped` (busy: another wake held the lease;
    shutting down) or `failed` (its lease could not be taken: a store failed between claim and
    wake). Unfenced: its writer holds no lease, and the slot claim already makes it the slot's only row."""
    skipped = status in (Status.skipped, Status.missed)
    row = introspection.WakeRow(
        wake_id=request.wake_id, agent_id=request.agent_id, tier=request.tier, trigger=request.trigger,
        scheduled_for=request.scheduled_for, started_at=now, manifest_root=None, **settle.provenance(session.config),
        note=f"{status}: {reason}" if skipped else None, error=None if skipped else reason,
    )
    async with session.stores.pg_conn() as conn:
        chain = await introspection.insert(conn, row, status=status)
    where = {"agent": request.agent_id, "tier": request.tier, "wake_id": str(request.wake_id),
             "scheduled_for": request.scheduled_for.isoformat() if request.scheduled_for else None, "chain": chain}
    metrics.observe_skipped(request.agent_id, request.tier, "missed" if status == Status.missed else metrics.reason_code(reason))
    if status == Status.missed:
        log.warning("wake.missed", reason=reason, **where)
    elif skipped:
        log.info("wake.skipped", reason=reason, **where)
    else:
        log.error("wake.failed", error=reason, **where)


LOST_BEFORE_ROW = "lease lost before the row: a newer holder's fence refused this wake's row; the slot was not run"


async def record_lost(session: Session, request: WakeRequest, *, now: dt.datetime, reason: str = LOST_BEFORE_ROW) -> bool:
    """The row of a claimed slot whose wake lost its lease before it could write its own (its
    process was suspended between the claim and the row, and a newer holder's fence refused the
    row): `failed` (nothing ran, so there is no manifest to close `abandoned`), unfenced, as
    `record_not_run` writes; the slot claim makes it the slot's only row. False when the slot has
    its row already."""
    async with session.stores.pg_conn() as conn:
        if await introspection.get(conn, request.wake_id) is not None:
            return False
    await record_not_run(session, request, reason, status=Status.failed, now=now)
    return True


async def record_dead_claims(session: Session, *, host: str, alive: Callable[[int], bool], now: dt.datetime) -> int:
    """At a daemon's start: the slots and one-shots claimed (in the last `DEAD_CLAIM_LOOKBACK`) by
    a process on this host that is dead and that have no row get their one row, `failed`, with the
    claim's wake id, linked into the chain; returns how many were written. Only a dead claimer's: a live one
    (even a suspended one) writes its own row."""
    config = session.config
    tiers = [(a, str(t)) for a, agent in config.agents.items() for t in agent.tiers]
    written = 0
    async with session.stores.pg_conn() as conn:
        for dead in await dead_processes.dead_claims(conn, host, tiers, now - DEAD_CLAIM_LOOKBACK, alive):
            reason = (DIED_AFTER_CLAIM if dead.scheduled_for is not None else DIED_AFTER_ONESHOT).format(claimer=dead.claimed_by)
            row = introspection.WakeRow(
                wake_id=dead.wake_id, agent_id=dead.agent_id, tier=Tier(dead.tier), trigger=Trigger(dead.trigger),
                scheduled_for=dead.scheduled_for, started_at=dead.claimed_at, manifest_root=None, **settle.provenance(config), error=reason,
            )
            chain = await dead_processes.record_claim_row(conn, dead, row, Status.failed)
            if chain is None:
                continue
            written += 1
            metrics.observe_skipped(dead.agent_id, dead.tier, "died_after_claim")
            log.error("wake.failed", error=reason, agent=dead.agent_id, tier=dead.tier, wake_id=str(dead.wake_id),
                      scheduled_for=dead.scheduled_for.isoformat() if dead.scheduled_for else None, chain=chain,
                      closed_by="start-up: its claimer is dead on this host")
    return written


@dataclass(frozen=True, kw_only=True)
class Missed:
    """A slot that got no row because PostgreSQL was unreachable: its claim failed, or the row
    that would say what happened to it could not be written. The daemon keeps it until
    PostgreSQL answers again (`wake.daemon.service`), then `record_missed` writes its row."""

    request: WakeRequest
    failed_at: dt.datetime  # when this slot was refused
    error: str
    outage_since: dt.datetime | None = None  # when this process first found PostgreSQL away, this outage


MISSED = "missed: store_unreachable"


async def record_missed(session: Session, missed: Missed, *, by: str, now: dt.datetime) -> str | None:
    """Write a `missed` row for the slot, unless it already has its one row. The slot claim
    decides, across replicas, exactly as for a slot that runs: this replica claims it now, or
    finds its own earlier claim without a row; a slot claimed by another replica is that
    replica's to record. Returns the row's chain link, or None when nothing needed writing."""
    request = missed.request
    assert request.scheduled_for is not None
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
        since = min(missed.outage_since or missed.failed_at, missed.failed_at)
        outage_s = (now - since).total_seconds()
        note = (f"{MISSED}: postgres unreachable from {since:%Y-%m-%dT%H:%M:%S%z} until it answered again at "
                f"{now:%Y-%m-%dT%H:%M:%S%z} ({outage_s:.0f} s); the slot was not run")
        row = introspection.WakeRow(
            wake_id=wake_id, agent_id=request.agent_id, tier=request.tier, trigger=request.trigger, scheduled_for=request.scheduled_for,
            started_at=missed.failed_at, manifest_root=None, **settle.provenance(session.config), note=note, error=missed.error,
        )
        chain = await introspection.insert(conn, row, status=Status.missed)
    metrics.observe_skipped(request.agent_id, request.tier, "store_unreachable")
    log.warning(
        "wake.missed", reason="store_unreachable", agent=request.agent_id, tier=request.tier, wake_id=str(wake_id),
        scheduled_for=request.scheduled_for.isoformat(), failed_at=since.isoformat(), outage_s=round(outage_s, 1), chain=chain,
    )
    return chain


_NOT_READ: Any = object()  # `held_back`'s pause when the claim did not read it (a one-shot)


@dataclass(kw_only=True)
class _Won:
    """A won claim: the agent's newest fence read with it (0: none yet; None: not read, for a
    one-shot), the pause in force (`_NOT_READ` when the claim did not read it), and what a slot's
    claim transaction did about the lease: why the slot is held back, or the lease it took, or
    why it could not take it (busy, or a store failed)."""

    floor: int | None
    pause: controls.Pause | None = _NOT_READ
    why: tuple[Status, str] | None = None
    taken: lease.Lease | None = None
    busy: LeaseBusy | None = None
    failed: Exception | None = None


async def _claimed(
    session: Session, request: WakeRequest, claim: Claim, now: Callable[[], dt.datetime], *, owner: str, jitter_s: float,
) -> _Won | None:
    """Steps 2-3 of a slot: claim it once across every replica, reading the fence floor and the
    pause in the same round trip; the loser logs why it stops and gets None. When the slot is to
    run, the lease is taken and its fence recorded inside the claim's transaction, so the claim and
    the fence commit together (one commit, not two) and no other replica can claim the slot while
    this one is between the two: its insert waits for this transaction, then finds the slot taken.
    A one-shot is claimed on its own row, and takes its lease after."""
    if request.trigger == Trigger.at:
        return _Won(floor=None) if await _claimed_oneshot(session, request, claim, now()) else None
    assert request.scheduled_for is not None
    won: _Won | None = None
    try:
        async with session.stores.pg_conn() as conn, conn.transaction():
            got = await slots.claim_reading_fence(
                conn, agent_id=request.agent_id, tier=request.tier, scheduled_for=request.scheduled_for, trigger=request.trigger,
                claimed_by=claim.by, claimed_at=now(), wake_id=request.wake_id,
            )
            metrics.observe_claim(got.won)
            if not got.won:
                _log_slot_taken(request, await slots.holder(conn, request.agent_id, request.tier, request.scheduled_for))
                return None
            won = _Won(floor=got.fence if got.fence is not None else 0, pause=got.pause)
            won.why = await held_back(session, request, now(), jitter_s, got.pause)
            if won.why is None:
                await _take_lease(session, request, won, owner=owner, conn=conn)
    except BaseException as exc:
        if won is not None and won.taken is not None:  # the claim did not commit: nor does the lease stay
            with contextlib.suppress(Exception):
                await asyncio.shield(won.taken.release())
        if isinstance(exc, TimeoutError):  # no answer in time, e.g. waiting on a stopped replica's open claim of the slot
            timeout_s = session.config.postgres.command_timeout_s
            raise StoreUnavailable("postgres", session.stores.pg_address, f"the slot claim got no answer within {timeout_s:g}s") from exc
        raise
    return won


async def _take_lease(session: Session, request: WakeRequest, won: _Won, *, owner: str, conn: Any) -> None:
    """The first try at the lease, inside the claim's transaction. Busy, or Redis failing, is
    noted on `won` and the claim still commits (the slot is spent and gets its one row; a busy
    lease is waited for after the commit, when the tier waits). Anything else (PostgreSQL failing
    or not answering in time while the fence is recorded) raises, and the claim rolls back with it:
    a slot that was never claimed, which the daemon spools (`StoreUnavailable`)."""
    ttl_ms = int(session.config.daemon.lease_ttl_s * 1000)
    try:
        won.taken = await lease.acquire(
            session.stores, request.agent_id, ttl_ms=ttl_ms, owner=owner, floor=won.floor, abandon=ABANDONED, conn=conn,
        )
    except LeaseBusy as busy:
        won.busy = busy
    except RedisError as exc:  # only Redis: anything else may have aborted the claim's transaction, so it rolls back
        won.failed = exc


async def busy_reason(session: Session, agent_id: str, busy: LeaseBusy) -> str:
    """`busy: …` naming the wake that holds the agent's lease (its id, tier and trigger, from its
    `started` row), or, before that wake has its row, the process holding the lease (host:pid, the
    lease token's random part left out)."""
    holder: introspection.Running | None = None
    with contextlib.suppress(Exception):  # PostgreSQL away: the row cannot be written either; say what is known
        async with session.stores.pg_conn() as conn:
            holder = await introspection.running(conn, agent_id)
    head = "busy: another wake of the agent holds its lease"
    if holder is not None:
        started = holder.started_at.astimezone(dt.UTC)
        return f"{head} (wake {holder.wake_id}, {holder.tier} {holder.trigger}, started {started:%Y-%m-%dT%H:%M:%SZ})"
    process = busy.holder.rsplit(":", 1)[0] if busy.holder and busy.holder.count(":") >= 2 else busy.holder
    return f"{head} (a wake not recorded yet, held by {process or 'a holder unknown'})"


def _first_try(won: _Won, wait_s: float) -> None:
    """Raise what the claim transaction's try at the lease met, unless a busy lease is to be waited for."""
    if won.failed is not None:
        raise won.failed
    if won.busy is not None and not wait_s:
        raise won.busy


def _log_slot_taken(request: WakeRequest, holder: slots.Holder | None) -> None:
    assert request.scheduled_for is not None
    metrics.observe_skipped(request.agent_id, request.tier, "slot_taken")
    log.info(
        "wake.skipped", reason="slot_taken", agent=request.agent_id, tier=request.tier, scheduled_for=request.scheduled_for.isoformat(),
        trigger=request.trigger, claimed_by=holder.claimed_by if holder else None,
        wake_id=str(holder.wake_id) if holder else None,
    )


async def _claimed_oneshot(session: Session, request: WakeRequest, claim: Claim, now: dt.datetime) -> bool:
    """A one-shot (`wake at`) is claimed on its own row, once across every replica and restart."""
    async with session.stores.pg_conn() as conn:
        won = await controls.claim_oneshot(conn, request.wake_id, claim.by, now)
    if not won:
        metrics.observe_skipped(request.agent_id, request.tier, "oneshot_taken")
        log.info("wake.skipped", reason="oneshot_taken", agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id))
    return won


def lateness_s(request: WakeRequest, now: dt.datetime, jitter_s: float) -> float:
    """How late a scheduled slot is found, its deliberate jitter not counted."""
    assert request.scheduled_for is not None
    return (now - request.scheduled_for).total_seconds() - jitter_s


def inactive_hours(config: Config, request: WakeRequest, now: dt.datetime) -> str | None:
    """Why a slot does not run in its tier's `active_hours`, or None. A scheduled slot is judged at
    its own instant, a catch-up when it would run (now); a one-shot, a manual wake and an
    escalation were asked for at their time and are not held back."""
    texts = config.tier(request.agent_id, request.tier).active_hours
    if not texts or request.trigger not in (Trigger.schedule, Trigger.catch_up):
        return None
    zone = config.agents[request.agent_id].timezone
    at = request.scheduled_for if request.trigger == Trigger.schedule and request.scheduled_for else now
    if hours.active(hours.parse(texts), zone, at):
        return None
    local = at.astimezone(zoneinfo.ZoneInfo(zone))
    return f"inactive_hours: {local:%a %H:%M} {zone} is outside the tier's active hours ({hours.describe(texts)})"


async def held_back(
    session: Session, request: WakeRequest, now: dt.datetime, jitter_s: float = 0.0, pause: controls.Pause | None = _NOT_READ,
) -> tuple[Status, str] | None:
    """After the claim, before the lease: why a claimed slot or one-shot does not run, or None.
    A pause (`wake pause`, read from PostgreSQL, so every replica sees it at once; a slot's claim
    has read it already, else it is read here) records it `skipped`, and so does a slot outside
    its tier's `active_hours` (`inactive_hours`); a scheduled slot found later
    than its tier's `misfire_grace_s` records it `missed`."""
    if pause is _NOT_READ:
        try:
            async with session.stores.pg_conn() as conn:
                pause = await controls.pause_for(conn, request.agent_id, request.tier, now)
        except Exception as exc:  # PostgreSQL away: the wake cannot write either; let it try and say why
            log.warning("pause.unreadable", agent=request.agent_id, tier=request.tier, error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
            pause = None
    if pause is not None:
        until = f" until {pause.until.isoformat()}" if pause.until else ""
        why = f" ({pause.reason})" if pause.reason else ""
        return Status.skipped, f"paused: by {pause.paused_by}{until}{why}"
    inactive = inactive_hours(session.config, request, now)
    if inactive is not None:
        return Status.skipped, inactive
    grace = session.config.tier(request.agent_id, request.tier).misfire_grace_s
    if grace is not None and request.trigger == Trigger.schedule:
        late = lateness_s(request, now, jitter_s)
        if late > grace:
            return Status.missed, f"{late:.1f}s late, past the tier's misfire_grace_s of {grace:g}s"
    return None


async def _claim_step(
    session: Session, request: WakeRequest, claim: Claim, now: Callable[[], dt.datetime], *, owner: str, t: Timing,
) -> _Won | None:
    """The claim, and the row of a claimed slot or one-shot held back (paused, too late); None
    when the wake does not run."""
    t0 = clock.monotonic_ms()
    won = await _claimed(session, request, claim, now, owner=owner, jitter_s=t.jitter_s)
    t.claim_ms = clock.monotonic_ms() - t0
    if won is None:
        t.outcome = "slot_taken"
        return None
    if won.why is None and won.pause is _NOT_READ:  # a one-shot: its pause is read now
        won.why = await held_back(session, request, now(), t.jitter_s)
    if won.why is not None:
        t.outcome = won.why[0]
        await record_not_run(session, request, won.why[1], status=won.why[0], now=now())
        return None
    return won


async def run(
    session: Session,
    request: WakeRequest,
    *,
    owner: str,
    claim: Claim | None = None,
    wait_s: float = 0.0,
    now: Callable[[], dt.datetime] = clock.now,
    stopping: Callable[[], bool] = lambda: False,
    on_running: OnRunning | None = None,
    timing: Timing | None = None,
) -> cycle.WakeOutcome | None:
    """Claim (when `claim` is given), lease, run. Returns the outcome, or None when the wake did not
    run (its slot was taken, the agent was busy, the daemon is stopping: each logged, and a claimed
    slot's row recorded).

    Without a claim there is no slot and so no row for a wake that never ran: a busy agent raises
    `AgentBusy`. A wake that lost its lease raises `LeaseLost` after settling `aborted`."""
    t = timing or Timing()
    won = await _claim_step(session, request, claim, now, owner=owner, t=t) if claim is not None else _Won(floor=None)
    if won is None:
        return None
    task = asyncio.current_task()
    t1 = clock.monotonic_ms()
    started = False
    try:
        _first_try(won, wait_s)
        async with agent_lease(
            session.config, session.stores, request.agent_id, owner=owner, guarded=task, wait_s=wait_s, floor=won.floor, taken=won.taken,
        ) as held:
            t.lease_ms = clock.monotonic_ms() - t1
            if stopping():
                t.outcome = "shutdown"
                if claim is not None:
                    await record_not_run(session, request, SHUTTING_DOWN, now=now())
                return None
            fenced = request.fenced(held.fence)
            started = True
            outcome = await _run_claimed(session, fenced, held, task, now, on_running, t, claim)
            t3 = clock.monotonic_ms()
        t.release_ms = clock.monotonic_ms() - t3
        return outcome
    except LeaseBusy as busy:
        t.outcome = "busy"
        if claim is None:
            raise AgentBusy(f"{busy}{BUSY_HINT}") from None
        await record_not_run(session, request, await busy_reason(session, request.agent_id, busy), now=now())
        return None
    except (asyncio.CancelledError, LeaseLost):
        raise
    except Exception as exc:
        if started or claim is None:  # the wake wrote its own row (only the release failed), or there is no slot
            raise
        # Claimed but never started (a store failed while taking the lease): the slot is spent,
        # so it still gets its one row, saying why (if PostgreSQL itself is down, the log does).
        t.outcome = "failed"
        reason = logs.redact_text(f"lease not taken: {type(exc).__name__}: {exc}")
        await record_not_run(session, request, reason, status=Status.failed, now=now())
        return None


async def _run_claimed(
    session: Session, request: WakeRequest, held: lease.Lease, task: asyncio.Task[Any] | None,
    now: Callable[[], dt.datetime], on_running: OnRunning | None, t: Timing, claim: Claim | None,
) -> cycle.WakeOutcome:
    """`_run_leased`, and for a claimed slot or one-shot whose wake wrote no row (its fence went
    stale first), that row (`_row_if_none`). A wake PostgreSQL was away for is the spool's."""
    try:
        outcome = await _run_leased(session, request, held, task, now, on_running, t)
    except LeaseLost:
        if claim is not None:
            await _row_if_none(session, request, claim, STALE_BEFORE_ROW.format(fence=held.fence), now())
        raise
    if claim is not None and not outcome.recorded and outcome.unreachable != "postgres":
        await _row_if_none(session, request, claim, STALE_BEFORE_ROW.format(fence=held.fence), now())
    return outcome


async def _row_if_none(session: Session, request: WakeRequest, claim: Claim, reason: str, now: dt.datetime) -> None:
    """A claimed slot or one-shot whose wake wrote no row (its fence went stale before the first
    write: a process suspended past its lease's TTL, say) still gets its one row: `aborted`,
    unfenced like `record_not_run`'s (the claim makes it the slot's only row), written under a lock
    on the claim unless a row exists by then."""
    pending = dead_processes.ClaimWithoutRow(
        agent_id=request.agent_id, tier=request.tier, scheduled_for=request.scheduled_for, trigger=request.trigger, claimed_by=claim.by,
        claimed_at=now, wake_id=request.wake_id,
    )
    row = introspection.WakeRow(
        wake_id=request.wake_id, agent_id=request.agent_id, tier=request.tier, trigger=request.trigger, scheduled_for=request.scheduled_for,
        started_at=now, manifest_root=None, **settle.provenance(session.config), error=reason,
    )
    async with session.stores.pg_conn() as conn:
        chain = await dead_processes.record_claim_row(conn, pending, row, Status.aborted)
    if chain is not None:
        log.warning("wake.aborted", reason=reason, agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id),
                    scheduled_for=request.scheduled_for.isoformat() if request.scheduled_for else None, chain=chain)


async def _run_leased(
    session: Session, request: WakeRequest, held: lease.Lease, task: asyncio.Task[Any] | None,
    now: Callable[[], dt.datetime], on_running: OnRunning | None, t: Timing,
) -> cycle.WakeOutcome:
    """Step 3 done: run the wake under the fence; losing the lease cancels it."""
    t.running_at = now()
    if request.trigger == Trigger.schedule and request.scheduled_for is not None:  # a catch-up slot is old on purpose
        metrics.observe_fire_lag(request.agent_id, request.tier, (t.running_at - request.scheduled_for).total_seconds() - t.jitter_s)
    t2 = clock.monotonic_ms()
    if on_running is not None:
        await on_running(request, held)
    try:
        outcome = await cycle.run_wake(session, request, now=now)
    except asyncio.CancelledError:
        if held.lost.is_set():
            log.warning(
                "wake.cancelled", reason="lease lost", agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id), fence=held.fence
            )
            if task is not None and task.uncancel() == 0:
                raise LeaseLost(f"the wake of agent {request.agent_id!r} lost its lease (fence {held.fence}) and was cancelled") from None
        raise
    t.wake_ms = clock.monotonic_ms() - t2
    t.outcome = outcome.status
    return outcome
