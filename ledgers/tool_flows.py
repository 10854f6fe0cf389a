"""`tool_flow_findings` and `tool_flow_state`: the toxic flows tiers' bindings held, their
acceptance, and the flow each tier's last wake held (docs/tools.md, "Toxic flows").

The one writer of both tables; `wake.witness.flows` decides what a binding holds."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("flows")


@dataclass(frozen=True, kw_only=True)
class Held:
    """A flow as stored: its id and the tools of each leg (no flow: `flow_id` None, legs empty)."""

    flow_id: str | None
    untrusted: tuple[str, ...] = ()
    private: tuple[str, ...] = ()
    egress: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Change:
    """The flow a tier held at its last vetted wake against the one it holds now."""

    created: Held | None = None  # a flow this wake holds that the last did not
    removed: Held | None = None  # a flow the last wake held that this one does not


@dataclass(frozen=True, kw_only=True)
class Finding(rows.Row):
    """A row of `tool_flow_findings`."""

    id: int
    agent_id: str
    tier: str
    flow_id: str
    untrusted: list[str]
    private: list[str]
    egress: list[str]
    policy: str
    raised_at: dt.datetime
    state: str
    accepted_by: str | None
    accepted_at: dt.datetime | None


async def raise_finding(conn: asyncpg.Connection, agent_id: str, tier: str, held: Held, policy: str, at: dt.datetime) -> int | None:
    """Record the flow as found at the tier; the new finding's id, or None (open already, or accepted)."""
    found = await conn.fetchval(_sql("raise_finding"), agent_id, tier, held.flow_id, list(held.untrusted), list(held.private), list(held.egress),
                                policy, at)
    return None if found is None else int(found)


async def findings(conn: asyncpg.Connection, *, include_closed: bool, limit: int) -> list[Finding]:
    return [Finding.from_row(r) for r in await conn.fetch(_sql("findings"), include_closed, limit)]


async def open_of_agent(conn: asyncpg.Connection, agent_id: str) -> list[Finding]:
    return [Finding.from_row(r) for r in await conn.fetch(_sql("open_of_agent"), agent_id)]


async def accept(conn: asyncpg.Connection, agent_id: str, tier: str, flow_id: str, *, by: str, at: dt.datetime) -> Finding | None:
    """Accept the open finding of a flow at a tier (None: there is none)."""
    row = await conn.fetchrow(_sql("accept"), agent_id, tier, flow_id, by, at)
    return None if row is None else Finding.from_row(row)


@dataclass(frozen=True, kw_only=True)
class TierFlows:
    """What vetting a tier's binding reads: the flow the tier's last wake held, and the flows an
    operator accepted at the tier."""

    last: Held | None  # None: no wake of the tier was vetted yet
    accepted: frozenset[str]


def tier_flows_part(agent_id: str, tier: str) -> queries.Part[TierFlows]:
    """`tier_flows`' read, to run alone or beside other ledgers' (`queries.together`)."""
    return queries.Part(_sql("tier_flows"), (agent_id, tier), _tier_flows)


async def tier_flows(conn: asyncpg.Connection, agent_id: str, tier: str) -> TierFlows:
    return await queries.one(conn, tier_flows_part(agent_id, tier))


def _tier_flows(row: asyncpg.Record) -> TierFlows:
    last = None
    if row["tool_flow_vetted"]:
        last = Held(flow_id=row["tool_flow_id"], untrusted=tuple(row["tool_flow_untrusted"]), private=tuple(row["tool_flow_private"]),
                    egress=tuple(row["tool_flow_egress"]))
    return TierFlows(last=last, accepted=frozenset(row["tool_flows_accepted"]))


async def save_state(conn: asyncpg.Connection, agent_id: str, tier: str, held: Held) -> None:
    await conn.execute(_sql("save_state"), agent_id, tier, held.flow_id, list(held.untrusted), list(held.private), list(held.egress))


def legs(held: Held) -> Sequence[tuple[str, tuple[str, ...]]]:
    return (("untrusted input", held.untrusted), ("private data", held.private), ("egress", held.egress))
