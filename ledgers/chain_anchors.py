"""`chain_anchors`: RFC 3161 timestamp responses over agents' chain heads (docs/ledger.md,
"Anchored chain heads"). The one writer of the table; `wake.witness.anchor` obtains and checks them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("anchors")


@dataclass(frozen=True, kw_only=True)
class Anchor(rows.Row):
    """One anchored head: the link it was taken at and the authority's whole response (DER)."""

    id: int
    agent_id: str
    chain_seq: int
    chain: str
    tsa_url: str
    token: bytes
    gen_time: dt.datetime
    anchored_at: dt.datetime


async def record(conn: asyncpg.Connection, agent_id: str, chain_seq: int, chain: str, *, tsa_url: str, token: bytes, gen_time: dt.datetime,
                 at: dt.datetime) -> int | None:
    """Store an anchor; None when that link was anchored already (the first is kept)."""
    got = await conn.fetchval(_sql("record"), agent_id, chain_seq, chain, tsa_url, token, gen_time, at)
    return None if got is None else int(got)


async def of_agent(conn: asyncpg.Connection, agent_id: str) -> list[Anchor]:
    return [Anchor.from_row(r) for r in await conn.fetch(_sql("of_agent"), agent_id)]


async def newest(conn: asyncpg.Connection) -> dt.datetime | None:
    """When anything was last anchored (None: never)."""
    got = await conn.fetchval(_sql("newest"))
    return got if isinstance(got, dt.datetime) else None
