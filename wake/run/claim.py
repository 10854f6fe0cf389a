"""Steps 2 and 3 of a wake, in the order they run: claim the slot (or one-shot), take the lease and
fence, run the wake under it; or record why not (`wake.run.unrun`).

`wake daemon`'s scheduled slots and catch-ups, its `wake trigger` requests and `wake up` all come
through these steps; `run` is them in a line, and the daemon (`wake.daemon.wakes`) calls the same
steps with its own bookkeeping between them. What differs between the callers is data on the call:
a request with a claim is claimed first (the loser runs nothing); `wait_s` is how long a busy agent
is waited for.

1. `claimed`: a slot is claimed in `wake_slots` once across every replica, reading the agent's
   newest fence and the pause in force in the same round trip; a one-shot (`wake at`, trigger
   `at`) on its own `wake_oneshots` row, its pause read after. A claim held back (paused, outside
   the tier's active hours, too late) gets its row here. What the claim decided is returned: a
   `Claimed` (its fence floor, and the lease when the first try inside the slot claim's
   transaction took it), or None.
2. `leased`: the lease is held (taken now when the claim's first try did not get it, waiting up to
   `wait_s`). Taking it makes this caller the agent's only live writer, so it is also the moment to
   close what a dead holder left behind: every row of the agent still `started` belongs to a
   process whose lease is gone, and is closed `abandoned` under the new fence. A claimed slot the
   lease could not be taken for gets its row (`skipped` busy, or `failed`).
3. `ran`: the wake (`wake.run.cycle`), cancelled if the lease is lost; a claimed wake that wrote
   no row (its fence went stale first) gets its `aborted` one.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import socket
import zoneinfo
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

from ledgers import controls, introspection, slots
from ledgers.vocab import Status, Trigger
from wake import clock, logs
from wake.config import Config, hours
from wake.context import WakeRequest
from wake.errors import AgentBusy, LeaseBusy, LeaseLost, StoreUnavailable
from wake.observe import metrics, tracing
from wake.run import cycle, unrun
from wake.run.session import Session
from wake.stores import Stores, lease

log = logs.get("wake.claim")

ABANDONED = "abandoned: its process died or lost the agent's lease before settling"
SHUTTING_DOWN = "shutting down"
BUSY_HINT = "; try again when it has settled"


def owner() -> str:
    """The readable prefix of lease tokens this process takes: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, kw_only=True)
class Claim:
    """Who claims a request's slot; None on `run` means the request has no slot to claim."""

    by: str  # the replica id recorded in `wake_slots`


@dataclass(frozen=True, kw_only=True)
class Claimed:
    """What a claim decided for a wake that is to run: who claimed it (None: a request with no slot,
    `UNCLAIMED`), the agent's newest fence read with the claim (None: not read), and the lease the
    first try inside the slot claim's transaction took (None: not taken, or not tried)."""

    by: str | None
    floor: int | None = None
    lease: lease.Lease | None = None


UNCLAIMED = Claimed(by=None)


def _log_abandoned(agent_id: str, fence: int, closed: list[introspection.AbandonedRow]) -> None:
    for row in closed:
        metrics.observe_abandoned(agent_id, row.tier)
        log.warning(
            "wake.abandoned", agent=agent_id, wake_id=str(row.wake_id), host=row.host, pid=row.pid, fence=row.fence,
            closed_by_fence=fence,
        )


async def take_lease(
    config: Config, stores: Stores, agent_id: str, *, owner: str, wait_s: float = 0.0, floor: int | None = None, conn: object = None,
) -> lease.Lease:
    """The agent's lease (TTL `daemon.lease_ttl_s`), with the agent's abandoned rows closed in the
    statement that records the fence. Raises `LeaseBusy` after `wait_s`. `floor`: the agent's
    newest fence, if just read. `conn`: record the fence in that connection's open transaction."""
    held = await lease.acquire(
        stores, agent_id, ttl_ms=int(config.daemon.lease_ttl_s * 1000), owner=owner, wait_s=wait_s, floor=floor, abandon=ABANDONED, conn=conn,
    )
    _log_abandoned(agent_id, held.fence, held.abandoned)
    return held


@contextlib.asynccontextmanager
async def agent_lease(config: Config, stores: Stores, agent_id: str, *, owner: str, wait_s: float = 0.0) -> AsyncIterator[lease.Lease]:
    """Hold the agent's lease for the body (`take_lease`), renewing it; losing it cancels the task."""
    held = await take_lease(config, stores, agent_id, owner=owner, wait_s=wait_s)
    async with lease.holding(held, guarded=asyncio.current_task()):
        yield held


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


# -- step 2: the claim ------------------------------------------------------------------------------


async def claimed(session: Session, request: WakeRequest, claim: Claim, *, owner: str, jitter_s: float = 0.0,
                  now: Callable[[], dt.datetime] = clock.now) -> Claimed | None:
    """Claim the request once across every replica; None when it does not run (the slot was taken:
    logged; it was held back: its row written)."""
    if request.trigger == Trigger.at:
        if not await _claimed_oneshot(session, request, claim, now()):
            return None
        got: Claimed | None = Claimed(by=claim.by)
        why = await held_back(session, request, now(), jitter_s)
    else:
        got, why = await _claimed_slot(session, request, claim, now, owner=owner, jitter_s=jitter_s)
    if got is not None and why is not None:
        await unrun.write(session, unrun.NotRun.of(request, why[0], why[1], at=now()))
        return None
    return got


async def _claimed_slot(
    session: Session, request: WakeRequest, claim: Claim, now: Callable[[], dt.datetime], *, owner: str, jitter_s: float,
) -> tuple[Claimed | None, tuple[Status, str] | None]:
    """A slot, claimed with the fence floor and the pause in one round trip. When it is to run, the
    first try at the lease happens inside the claim's transaction, so the claim and the fence
    commit together (one commit, not two) and no other replica can claim the slot meanwhile. A
    busy lease or a Redis failure leaves the claim to commit without it (the slot is spent and
    gets its one row; `leased` tries again); anything else (PostgreSQL failing or not answering in
    time) rolls the claim back with it: a slot never claimed, which the daemon spools."""
    assert request.scheduled_for is not None
    taken: lease.Lease | None = None
    try:
        async with session.stores.pg_conn() as conn, conn.transaction():
            got = await slots.claim_reading_fence(
                conn, agent_id=request.agent_id, tier=request.tier, scheduled_for=request.scheduled_for, trigger=request.trigger,
                claimed_by=claim.by, claimed_at=now(), wake_id=request.wake_id,
            )
            metrics.observe_claim(got.won)
            if not got.won:
                _log_slot_taken(request, await slots.holder(conn, request.agent_id, request.tier, request.scheduled_for))
                return None, None
            floor = got.fence if got.fence is not None else 0
            why = _held_back(session.config, request, now(), jitter_s, got.pause)
            if why is None:
                with contextlib.suppress(LeaseBusy, RedisError):  # only these: anything else may have aborted the transaction
                    taken = await take_lease(session.config, session.stores, request.agent_id, owner=owner, floor=floor, conn=conn)
    except BaseException as exc:
        if taken is not None:  # the claim did not commit: nor does the lease stay
            with contextlib.suppress(Exception):
                await asyncio.shield(taken.release())
        if isinstance(exc, TimeoutError):  # no answer in time, e.g. waiting on a stopped replica's open claim of the slot
            timeout_s = session.config.postgres.command_timeout_s
            raise StoreUnavailable("postgres", session.stores.pg_address, f"the slot claim got no answer within {timeout_s:g}s") from exc
        raise
    return Claimed(by=claim.by, floor=floor, lease=taken), why


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


async def held_back(session: Session, request: WakeRequest, now: dt.datetime, jitter_s: float = 0.0) -> tuple[Status, str] | None:
    """After the claim, before the lease: why a claimed one-shot (or slot) does not run, or None,
    the pause read from PostgreSQL (every replica sees it at once). PostgreSQL away: the wake cannot
    write either; it is let try, and says why."""
    pause: controls.Pause | None = None
    try:
        async with session.stores.pg_conn() as conn:
            pause = await controls.pause_for(conn, request.agent_id, request.tier, now)
    except Exception as exc:
        log.warning("pause.unreadable", agent=request.agent_id, tier=request.tier, error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
    return _held_back(session.config, request, now, jitter_s, pause)


def _held_back(config: Config, request: WakeRequest, now: dt.datetime, jitter_s: float, pause: controls.Pause | None) -> tuple[Status, str] | None:
    """A pause (`wake pause`) records it `skipped`, and so does a slot outside its tier's
    `active_hours` (`inactive_hours`); a scheduled slot found later than its tier's
    `misfire_grace_s` records it `missed`."""
    if pause is not None:
        until = f" until {pause.until.isoformat()}" if pause.until else ""
        why = f" ({pause.reason})" if pause.reason else ""
        return Status.skipped, f"paused: by {pause.paused_by}{until}{why}"
    inactive = inactive_hours(config, request, now)
    if inactive is not None:
        return Status.skipped, inactive
    grace = config.tier(request.agent_id, request.tier).misfire_grace_s
    if grace is not None and request.trigger == Trigger.schedule:
        late = lateness_s(request, now, jitter_s)
        if late > grace:
            return Status.missed, f"{late:.1f}s late, past the tier's misfire_grace_s of {grace:g}s"
    return None


# -- step 3: the lease ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def leased(
    session: Session, request: WakeRequest, claim: Claimed, *, owner: str, wait_s: float = 0.0, now: Callable[[], dt.datetime] = clock.now,
) -> AsyncIterator[lease.Lease | None]:
    """Hold the agent's lease for the body, renewing it (losing it cancels the task); None when it
    could not be taken for a claimed request, whose row then says why. Without a claim there is
    no slot and so no row for a wake that never ran: a busy agent raises `AgentBusy`."""
    try:
        with tracing.span("wake.lease", {"wake.lease.with_claim": claim.lease is not None}) as span:
            held = claim.lease or await take_lease(session.config, session.stores, request.agent_id, owner=owner, wait_s=wait_s, floor=claim.floor)
            span.set_attribute("wake.fence", held.fence)
    except LeaseBusy as busy:
        if claim.by is None:
            raise AgentBusy(f"{busy}{BUSY_HINT}") from None
        await unrun.write(session, unrun.NotRun.of(request, Status.skipped, await busy_reason(session, request.agent_id, busy), at=now()))
        yield None
        return
    except Exception as exc:
        if claim.by is None:
            raise
        # Claimed but never started (a store failed while taking the lease): the slot is spent,
        # so it still gets its one row, saying why (if PostgreSQL itself is down, the log does).
        reason = logs.redact_text(f"lease not taken: {type(exc).__name__}: {exc}")
        await unrun.write(session, unrun.NotRun.of(request, Status.failed, reason, at=now()))
        yield None
        return
    async with lease.holding(held, guarded=asyncio.current_task()):
        yield held


# -- steps 2 and 3 in a line, then the wake ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Started:
    """A wake claimed and leased, ready to run: its request under the fence, the lease held, who
    claimed it (None: nobody, a request with no slot), and how long the claim and the lease took."""

    request: WakeRequest
    held: lease.Lease
    by: str | None
    claim_ms: float
    lease_ms: float


@contextlib.asynccontextmanager
async def started(
    session: Session, request: WakeRequest, claim: Claim | None, *, owner: str, wait_s: float = 0.0, jitter_s: float = 0.0,
    now: Callable[[], dt.datetime] = clock.now,
) -> AsyncIterator[Started | None]:
    """Claim (when `claim` is given), then hold the lease for the body; None when the wake does not
    run (`claimed`, `leased`: each logged, and a claimed request's row recorded). The wake's trace
    span opens here, before its claim, and closes with the body."""
    with tracing.wake_span(wake_id=request.wake_id, agent=request.agent_id, tier=request.tier, trigger=request.trigger,
                           scheduled_for=request.scheduled_for) as span:
        t0 = clock.monotonic_ms()
        if claim is not None:
            with tracing.span("wake.claim", {"wake.claim.by": claim.by}) as claim_span:
                got = await claimed(session, request, claim, owner=owner, jitter_s=jitter_s, now=now)
                claim_span.set_attribute("wake.claim.runs", got is not None)
        else:
            got = UNCLAIMED
        t1 = clock.monotonic_ms()
        if got is None:
            span.set_attribute("wake.status", "not run")
            yield None
            return
        async with leased(session, request, got, owner=owner, wait_s=wait_s, now=now) as held:
            if held is None:
                span.set_attribute("wake.status", "not run")
                yield None
                return
            yield Started(request=request.fenced(held.fence), held=held, by=got.by, claim_ms=t1 - t0, lease_ms=clock.monotonic_ms() - t1)


async def ran(session: Session, wake: Started, *, now: Callable[[], dt.datetime] = clock.now) -> cycle.WakeOutcome:
    """Steps 4-10 (`wake.run.cycle`) under the fence; losing the lease cancels the wake and raises
    `LeaseLost`. A claimed wake that wrote no row (its fence went stale first) gets its `aborted`
    one (`unrun.stale`); one that PostgreSQL was away for is the daemon's spool's."""
    request, held = wake.request, wake.held
    try:
        outcome = await cycle.run_wake(session, request, now=now)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if held.lost.is_set():
            log.warning(
                "wake.cancelled", reason="lease lost", agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id), fence=held.fence
            )
            if task is not None and task.uncancel() == 0:
                if wake.by is not None:
                    await unrun.stale(session, request, claimed_by=wake.by, fence=held.fence, now=now())
                raise LeaseLost(f"the wake of agent {request.agent_id!r} lost its lease (fence {held.fence}) and was cancelled") from None
        raise
    if wake.by is not None and not outcome.recorded and outcome.unreachable != "postgres":
        await _aborted_row(session, request, claimed_by=wake.by, held=held, at=now())
    return outcome


async def _aborted_row(session: Session, request: WakeRequest, *, claimed_by: str, held: lease.Lease, at: dt.datetime) -> None:
    """The `aborted` row of a claimed wake that wrote none (`unrun.stale`), shielded: the lease's
    renewal finding the lease gone while the row is written (a Redis failover lost it) cancels the
    task, but the wake is over and its slot still gets its one row."""
    writing = asyncio.ensure_future(unrun.stale(session, request, claimed_by=claimed_by, fence=held.fence, now=at))
    try:
        await asyncio.shield(writing)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if not held.lost.is_set() or task is None or task.uncancel() > 0:
            raise  # a shutdown's cancellation: the write goes on, shielded
        await writing


async def run(
    session: Session, request: WakeRequest, *, owner: str, claim: Claim | None = None, wait_s: float = 0.0,
    now: Callable[[], dt.datetime] = clock.now,
) -> cycle.WakeOutcome | None:
    """Claim (when `claim` is given), lease, run, in a line. Returns the outcome, or None when the
    wake did not run (its slot was taken, it was held back, the agent was busy: each logged, and a
    claimed request's row recorded). A wake that lost its lease raises `LeaseLost` after its row."""
    async with started(session, request, claim, owner=owner, wait_s=wait_s, now=now) as wake:
        return await ran(session, wake, now=now) if wake is not None else None
