"""The dead-man check (docs/incidents.md, "The dead-man check"): a tier that has not settled for two
of its slots plus its grace gets an incident, whichever replica notices.

Run by the daemon's incident watch (`wake.daemon.incident_watch`) on every replica, every
`[daemon] incident_watch_s`, over every configured tier (not only the ones this replica owns: the
owner may be the one that is stuck). The incident is written by `wake.run.incident_policy.overdue`, one
per (agent, tier, signature) whoever checks; the tier's next completed or quiet row closes it.

When a tier is overdue, as a pure function of its schedule and the instants given:

- its *sign of life* is the finish of its newest row of a wake that ran (`ledgers.vocab.RAN`:
  completed, quiet, failed, aborted, halted or abandoned; a failing tier has its own incidents), or,
  if later, the newest slot a pause held back (a tier resumed after a week is not overdue at once),
  or, for a tier that never ran, when this check first saw it;
- it is overdue when `DUE` of its slots that would run fall after that sign of life and at or before
  `now - grace`: its schedule's own slots, quiet hours and active hours applied (a 09:00-17:00 tier is
  never overdue at night for the slots it skips there, but the day's slots that never ran count,
  even once the window has closed), with grace its `jitter_s` plus its `misfire_grace_s`;
- a tier paused now is not overdue (a pause is an operator's own silence).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

import asyncpg

from ledgers import controls, introspection
from wake import logs
from wake.config import Config, hours
from wake.daemon import schedule
from wake.run import incident_policy

log = logs.get("wake.daemon.deadman")

DUE = 2  # slots that should have run since the tier's sign of life: "two of its intervals"
# How many slots one tier's walk may step over (quiet or inactive ones) before it stops looking.
MAX_STEPS = 10_000


@dataclass(frozen=True, kw_only=True)
class Overdue:
    agent_id: str
    tier: str
    since: dt.datetime | None  # its sign of life; None: it never ran (counted from when the check first saw it)
    due: int


def grace_s(config: Config, agent_id: str, tier: str) -> float:
    """How late a slot of the tier may legitimately run: its jitter and its misfire grace."""
    conf = config.tier(agent_id, tier)
    return float(conf.jitter_s) + float(conf.misfire_grace_s or 0.0)


def due_slots(sched: schedule.Schedule, after: dt.datetime, until: dt.datetime, *, limit: int = DUE) -> int:
    """How many slots this tier would run (quiet and active hours applied) fall in (after, until], up to `limit`."""
    count, t = 0, after
    for _ in range(MAX_STEPS):
        if count >= limit or t >= until:
            break
        slot = schedule.next_fire(sched, t)
        if slot is None or slot > until:
            break
        if hours.active(sched.active, sched.timezone, slot):
            count += 1
        t = slot
    return count


def sign_of_life(last: introspection.LastSettled | None) -> dt.datetime | None:
    if last is None:
        return None
    signs = [t for t in (last.finished_at, last.paused_at) if t is not None]
    return max(signs) if signs else None


def overdue(
    config: Config, lasts: Mapping[tuple[str, str], introspection.LastSettled], paused: set[tuple[str, str]], now: dt.datetime,
    first_seen: MutableMapping[tuple[str, str], dt.datetime],
) -> list[Overdue]:
    """Every configured tier overdue at `now` (`first_seen`: when this check first saw each tier, kept by the caller)."""
    found = []
    for sched in schedule.all_schedules(config):
        key = (sched.agent_id, sched.tier)
        seen = first_seen.setdefault(key, now)
        if key in paused or (sched.agent_id, controls.ALL_TIERS) in paused:
            continue
        since = sign_of_life(lasts.get(key))
        due = due_slots(sched, since or seen, now - dt.timedelta(seconds=grace_s(config, *key)))
        if due >= DUE:
            found.append(Overdue(agent_id=sched.agent_id, tier=sched.tier, since=since, due=due))
    return found


async def check(
    conn: asyncpg.Connection, config: Config, lasts: Mapping[tuple[str, str], introspection.LastSettled], now: dt.datetime,
    first_seen: MutableMapping[tuple[str, str], dt.datetime],
) -> list[int]:
    """One round: the overdue tiers' incidents opened (the ids this call opened)."""
    paused = {(p.agent_id, p.tier) for p in await controls.active_pauses(conn, now)}
    opened = []
    for late in overdue(config, lasts, paused, now, first_seen):
        got = await incident_policy.overdue(conn, config, agent_id=late.agent_id, tier=late.tier, since=late.since, due=late.due, at=now)
        if got is not None:
            opened.append(got)
    return opened
