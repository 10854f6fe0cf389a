"""Wakes claimed and never recorded: a process that died between taking a one-shot and its row.

A `wake at` one-shot is claimed on its `wake_oneshots` row (`claimed_by`: the claiming replica's
id, `host:pid:random`), a `wake trigger` request taken onto the replica's list of taken requests
(`wake.daemon.control`); the wake's one row comes after, a held-back one's at once, a running
one's once the wake has its manifest. A claimer killed in between leaves a claim nothing will ever
record, and no lease or `started` row for the next holder to close (`wake.run.claim`). So the
next replica gives it its row: `failed` (claimed, never run), naming the claimer, linked into the agent's chain,
under the id chosen when the wake was asked for (it can have no other row). The wake is not run
again: whoever asked for it is told, and may ask again.

A claimer is taken for dead only when that is known: on this host, its pid is not alive (the
daemon looks at its start and then once a heartbeat's lifetime); on another host, it has no
heartbeat (`wake:replica:<id>`) and claimed longer ago than a heartbeat lives, since a replica
beats from its start. A replica cut off from Redis that long is taken for dead too: it cannot take
the agent's lease meanwhile, and should it come back its wake fails at the row the id already has.
Of several replicas sweeping at once, one writes each row (`ledgers.orphans`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass

from ledgers import introspection
from ledgers import orphans as orphans_ledger
from ledgers.vocab import Tier, Trigger
from wake import logs
from wake.observe import metrics
from wake.run import settle
from wake.run.session import Session

log = logs.get("wake.orphans")

UNRECORDED = "claimed, never run: its process {claimer} {how} after claiming it, before its row was written"


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
    session: Session, *, wake_id: uuid.UUID, agent_id: str, tier: Tier, trigger: Trigger, started_at: dt.datetime, claimer: str, how: str,
) -> introspection.WakeRow:
    return introspection.WakeRow(
        wake_id=wake_id, agent_id=agent_id, tier=tier, trigger=trigger, scheduled_for=None, started_at=started_at, manifest_root=None,
        **settle.provenance(session.config), error=UNRECORDED.format(claimer=claimer, how=how),
    )


async def record(session: Session, row: introspection.WakeRow, *, claimer: str, oneshot: bool) -> str | None:
    """Write the row unless the wake has one (a one-shot's under its locked claim); log it."""
    async with session.stores.pg_conn() as conn:
        chain = await orphans_ledger.record_unrecorded(conn, row, claimed_by=claimer if oneshot else None)
    if chain is not None:
        metrics.observe_skipped(row.agent_id, row.tier, "died_after_claim")
        log.error(
            "wake.failed", error=row.error, agent=row.agent_id, tier=row.tier, wake_id=str(row.wake_id), trigger=row.trigger, claimed_by=claimer,
            closed_by="unrecorded: its claimer died before its row", chain=chain,
        )
    return chain


async def close_unrecorded(session: Session, live: Liveness, now: dt.datetime) -> list[introspection.WakeRow]:
    """Give each one-shot whose claimer is dead its `failed` row; returns the rows written."""
    async with session.stores.pg_conn() as conn:
        claimed = await orphans_ledger.unrecorded_oneshots(conn, now)
    written = []
    for shot in claimed:
        how = dead_because(shot.claimed_by, shot.claimed_at, now, live)
        if how is None or shot.agent_id not in session.config.agents:
            continue
        row = unrecorded_row(
            session, wake_id=shot.wake_id, agent_id=shot.agent_id, tier=Tier(shot.tier), trigger=Trigger.at, started_at=shot.claimed_at,
            claimer=shot.claimed_by, how=how,
        )
        if await record(session, row, claimer=shot.claimed_by, oneshot=True) is not None:  # else recorded meanwhile
            written.append(row)
    return written
