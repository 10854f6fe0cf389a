"""Slots that got no row because PostgreSQL was unreachable: their claim failed, or the row that
would say what happened to them could not be written. The daemon keeps them here, in memory, until
PostgreSQL answers again, then each gets its `missed` row (`wake.run.unrun.missed`; the slot claim
decides, across replicas). The oldest are dropped, and logged, past `SPOOL_MAX`."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import asyncpg

from wake import logs, stores
from wake.context import WakeRequest
from wake.errors import StoreUnavailable
from wake.run import unrun
from wake.run.session import Session

log = logs.get("wake.daemon")

SPOOL_MAX = 1000
SPOOL_RETRY_S = 1.0  # how often an unreachable PostgreSQL is asked again
# PostgreSQL failing under a slot, however asyncpg says it: the slot is spooled, and recorded once it answers.
PG_SLOT_FAILURES: tuple[type[BaseException], ...] = (*stores.PG_OUTAGE, asyncpg.PostgresError)


@dataclass(frozen=True, kw_only=True)
class Missed:
    """A slot kept until PostgreSQL answers."""

    request: WakeRequest
    failed_at: dt.datetime  # when this slot was refused
    error: str
    outage_since: dt.datetime | None = None  # when this process first found PostgreSQL away, this outage


def unreachable(exc: BaseException, pg_address: str) -> str:
    """What PostgreSQL failing under a slot is called in its spooled entry and its row, whatever
    asyncpg raised: `postgres unreachable at <address>: <why>`."""
    if isinstance(exc, StoreUnavailable) and exc.store == "postgres":
        return str(exc)
    return str(StoreUnavailable("postgres", pg_address, f"{type(exc).__name__}: {exc}"))


class Spool:
    """The slots kept, oldest first; `loop` is the daemon's side task that writes them."""

    def __init__(self, *, by: str, now: Callable[[], dt.datetime]) -> None:
        self.by = by
        self.now = now
        self.entries: collections.deque[Missed] = collections.deque()
        self.spooled = asyncio.Event()

    def __iter__(self) -> Iterator[Missed]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def keep(self, request: WakeRequest, error: str) -> None:
        """Keep a slot that got no row because PostgreSQL was unreachable."""
        if len(self.entries) >= SPOOL_MAX:
            dropped = self.entries.popleft()
            log.error("daemon.spool_full", agent=dropped.request.agent_id, tier=dropped.request.tier,
                      scheduled_for=dropped.request.scheduled_for.isoformat() if dropped.request.scheduled_for else None, kept=SPOOL_MAX)
        now = self.now()
        since = self.entries[0].outage_since if self.entries else now  # the spool empties when PostgreSQL answers
        self.entries.append(Missed(request=request, failed_at=now, error=logs.redact_text(error), outage_since=since))
        log.warning("slot.spooled", agent=request.agent_id, tier=request.tier, wake_id=str(request.wake_id),
                    scheduled_for=request.scheduled_for.isoformat() if request.scheduled_for else None, error=logs.redact_text(error),
                    spooled=len(self.entries))
        self.spooled.set()

    async def flush(self, session: Session) -> int:
        """Record every kept slot `missed`; stops at the first that PostgreSQL still refuses.
        Returns how many are left."""
        while self.entries:
            missed = self.entries[0]
            try:
                await unrun.missed(session, missed.request, failed_at=missed.failed_at, error=missed.error, outage_since=missed.outage_since,
                                   by=self.by, now=self.now())
            except stores.PG_OUTAGE:  # PostgreSQL still away, or failing under the write: kept, tried again
                return len(self.entries)
            except Exception as exc:  # a row that cannot be written for another reason is logged, not retried forever
                log.error("daemon.spool_failed", wake_id=str(missed.request.wake_id), error=logs.redact_text(f"{type(exc).__name__}: {exc}"))
            if self.entries and self.entries[0] is missed:
                self.entries.popleft()
        self.spooled.clear()
        return 0

    async def loop(self, session: Session) -> None:
        """The side task: when slots are kept, ask PostgreSQL every `SPOOL_RETRY_S` until it answers."""
        while True:
            await self.spooled.wait()
            if await self.flush(session):
                await asyncio.sleep(SPOOL_RETRY_S)

    def lost(self) -> None:
        """At shutdown: what is still kept is lost with the process; say so."""
        if self.entries:
            first = self.entries[0].request.scheduled_for
            log.error("daemon.spool_lost", slots=len(self.entries), first=first.isoformat() if first else None)
