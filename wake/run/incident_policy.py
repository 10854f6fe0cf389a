"""Incidents (docs/incidents.md): every terminal row passes through `witness`, in the transaction
that writes it (`wake.run.settle`, `wake.run.unrun`).

A failed, aborted, abandoned or missed row opens the incident of its (agent, tier, signature), or
counts on the one open; opening queues one notice per route of the tier's `deliver_to` (the
outbox, keyed by a wake id derived from the incident, so once per route whatever retries). A
completed or quiet row closes the tier's open incidents, each with one recovery notice. With the
tier's `pause_after_failures` set, that many consecutive failures pause the tier (`wake_pauses`),
the reason naming the incident.

`acknowledge` is the one writer of an acknowledgement: `wake incidents ack ID --by` and the
console's ack button (scoped to the agent of its page) both call it.

`overdue` is the dead-man check's writer (`wake.daemon.deadman` decides when a tier is overdue):
one incident per (agent, tier, signature) however many replicas check, one notice when it opens,
closed by the tier's next completed or quiet row like any other.
"""

from __future__ import annotations

import datetime as dt
import uuid

import asyncpg

from ledgers import controls, incidents, outbox
from ledgers.vocab import Status
from wake import logs
from wake.config import Config
from wake.errors import InvalidInput, NotFound

log = logs.get("wake.incidents")

FAILING = frozenset({Status.failed, Status.aborted, Status.abandoned, Status.missed})
CLOSING = frozenset({Status.completed, Status.quiet})
PAUSED_BY = "wake-incidents"
BY_MAX = 100  # characters of who acknowledges
ID_MAX = 2**62
_NOTICE_NS = uuid.UUID("6f1d1c1e-44a0-4c1b-9d3e-000000000044")


def notice_id(incident_id: int, kind: str) -> uuid.UUID:
    """The outbox's wake id for an incident's notice: one per (incident, kind, route)."""
    return uuid.uuid5(_NOTICE_NS, f"incident:{incident_id}:{kind}")


async def _notify(
    conn: asyncpg.Connection, config: Config, *, incident_id: int, kind: str, agent_id: str, tier: str, text: str, at: dt.datetime,
    about: uuid.UUID | None,
) -> None:
    """One notice per route of the tier's `deliver_to`; its wake id (the channels' idempotency
    key) is the notice's own, `about` names the row's wake (None: a dead-man incident's opening,
    about no row, says `deadman`)."""
    key = notice_id(incident_id, kind)
    payload: dict[str, object] = {
        "kind": f"incident.{kind}", "incident": incident_id, "wake_id": str(key), "about_wake": str(about) if about else None, "agent": agent_id,
        "tier": tier, "trigger": "incident", "status": kind, "text": text, "settled_at": at.isoformat(),
    }
    if about is None:
        payload["deadman"] = True
    for route in config.tier(agent_id, tier).deliver_to:
        await outbox.enqueue(conn, wake_id=key, route=route, agent_id=agent_id, tier=tier, payload=payload, at=at)


async def witness(
    conn: asyncpg.Connection, config: Config, *, wake_id: uuid.UUID, agent_id: str, tier: str, status: str, error: str | None,
    note: str | None, at: dt.datetime, incidents_open: bool | None = None,
) -> None:
    """What the terminal row `status` of (agent, tier) does to the tier's incidents; in the caller's
    transaction. `incidents_open`: whether the tier had an open incident when the row was written,
    read in the row's own statement (`introspection.insert_settled`); False spares a closing row
    the statement that would close none. None: not known, the statement runs."""
    if agent_id not in config.agents or tier not in config.agents[agent_id].tiers:
        return
    if status in CLOSING:  # one statement, none when the row's own statement saw nothing open
        if incidents_open is False:
            return
        closed = await incidents.close_open(conn, agent_id=agent_id, tier=tier, at=at, wake_id=wake_id)
        if closed:
            async with conn.transaction():
                await _recovered(conn, config, closed, wake_id=wake_id, status=status, at=at)
        return
    if status in FAILING:
        async with conn.transaction():  # a savepoint in the caller's transaction, or its own
            await _failing(conn, config, wake_id=wake_id, agent_id=agent_id, tier=tier, status=status, error=error, note=note, at=at)


DEADMAN = "missed"  # a dead-man incident's signature starts `missed: no settled row since …`


def deadman_signature(since: dt.datetime | None) -> tuple[str, str]:
    """(signature, text) of a dead-man incident: the text names the instant, the signature
    normalises it away, so every check of one silence meets one incident."""
    text = f"no settled row since {since.isoformat() if since is not None else 'the check began (none ever)'} (dead-man check)"
    return f"{DEADMAN}: {incidents.signature(text)}", text


async def overdue(
    conn: asyncpg.Connection, config: Config, *, agent_id: str, tier: str, since: dt.datetime | None, due: int, at: dt.datetime,
) -> int | None:
    """The tier has not settled since `since` though `due` of its slots were due: open its dead-man
    incident (one notice per route) unless open. The incident's id when this call opened it."""
    if agent_id not in config.agents or tier not in config.agents[agent_id].tiers:
        return None
    sig, text = deadman_signature(since)
    # the incident's first and last wake: an id of its own (no row is about it), the same for every replica
    about = uuid.uuid5(_NOTICE_NS, f"deadman:{agent_id}/{tier}:{since.isoformat() if since else '-'}")
    async with conn.transaction():
        opened = await incidents.open_once(conn, agent_id=agent_id, tier=tier, sig=sig, about=about, error=text, at=at)
        if opened is None:
            return None
        log.warning("incident.opened", incident=opened, agent=agent_id, tier=tier, signature=sig, deadman=True, due=due)
        await _notify(conn, config, incident_id=opened, kind="opened", agent_id=agent_id, tier=tier, at=at, about=None,
                      text=f"incident {opened}: {agent_id}/{tier} {text}; {due} slot(s) were due")
    return opened


async def _recovered(
    conn: asyncpg.Connection, config: Config, closed: list[incidents.Incident], *, wake_id: uuid.UUID, status: str, at: dt.datetime,
) -> None:
    for inc in closed:
        log.info("incident.closed", incident=inc.id, agent=inc.agent_id, tier=inc.tier, rows=inc.rows_seen)
        await _notify(conn, config, incident_id=inc.id, kind="recovered", agent_id=inc.agent_id, tier=inc.tier, at=at, about=wake_id,
                      text=f"recovered: {inc.agent_id}/{inc.tier} {status} again after {inc.rows_seen} failing row(s) (incident {inc.id})")


async def _failing(
    conn: asyncpg.Connection, config: Config, *, wake_id: uuid.UUID, agent_id: str, tier: str, status: str, error: str | None,
    note: str | None, at: dt.datetime,
) -> None:
    text = error or note or status
    sig = f"{status}: {incidents.signature(text)}"
    seen = await incidents.open_or_count(conn, agent_id=agent_id, tier=tier, sig=sig, wake_id=wake_id, error=text, at=at)
    if seen is None:  # another writer opened it in the same instant; its row counts there
        return
    if seen.opened:
        log.warning("incident.opened", incident=seen.id, agent=agent_id, tier=tier, signature=sig)
        await _notify(conn, config, incident_id=seen.id, kind="opened", agent_id=agent_id, tier=tier, at=at, about=wake_id,
                      text=f"incident {seen.id}: {agent_id}/{tier} {status} (wake {wake_id}): {text[:300]}")
    limit = config.tier(agent_id, tier).pause_after_failures
    if limit is not None and await incidents.consecutive_failures(conn, agent_id, tier) >= limit:
        if await controls.pause_for(conn, agent_id, tier, at) is None:
            await controls.pause(conn, agent_id=agent_id, tier=tier, paused_by=PAUSED_BY, paused_at=at, until=None,
                                 reason=f"incident {seen.id}: {limit} consecutive failures ({sig[:120]})")
            log.warning("incident.paused", incident=seen.id, agent=agent_id, tier=tier, failures=limit)


def _shown(text: str, limit: int) -> str:
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def incident_number(text: str | None) -> int:
    """An incident's id as an operator typed it (`#` allowed); InvalidInput, one line, otherwise."""
    value = (text or "").strip().removeprefix("#")
    if not (value.isascii() and value.isdigit()) or len(value) > 19 or not 1 <= int(value) <= ID_MAX:
        raise InvalidInput(f"incident id {_shown(text or '', 40)!r} is not a number (`wake incidents` lists them)")
    return int(value)


def acker(by: str | None) -> str:
    """Who acknowledges: 1 to BY_MAX printable characters; InvalidInput otherwise."""
    who = (by or "").strip()
    if not who or len(who) > BY_MAX or not who.isprintable():
        raise InvalidInput(f"--by must be a name of 1 to {BY_MAX} printable characters")
    return who


async def acknowledge(conn: asyncpg.Connection, incident_id: int, by: str, at: dt.datetime, *, agent_id: str | None = None) -> None:
    """Record who acknowledged the incident (it stays open until a success of its tier closes it).
    With `agent_id`, only an incident of that agent: another agent's id is NotFound, as an unknown
    one is, and changes nothing. Acknowledged already: InvalidInput naming who did."""
    if await incidents.ack(conn, incident_id, by, at, agent_id=agent_id):
        log.info("incident.acked", incident=incident_id, by=by)
        return
    found = await incidents.get(conn, incident_id)
    if found is None or (agent_id is not None and found.agent_id != agent_id):
        of = f" of agent {agent_id}" if agent_id is not None else ""
        raise NotFound(f"no incident {incident_id}{of} (`wake incidents --all` lists them)")
    raise InvalidInput(f"incident {incident_id} was already acknowledged by {_shown(found.acked_by or '', 40)}")
