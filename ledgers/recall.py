"""Full-text recall over the agent's daybook, facts, human contact and living summaries (docs/recall.md).

PostgreSQL does the matching and ranking (`websearch_to_tsquery`, `ts_rank_cd`) in the agent's
text search configuration; the GIN indexes of migration 0011 serve the configurations `simple`
and `english`. Each row carries its provenance from stored columns only: the ledger, who wrote
it, when, and whether it is the agent's own earlier answer. What to project is decided above
this module (`surfaces.recall`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

# The configurations migration 0011 indexes; any other installed one works, unindexed.
INDEXED_DICTIONARIES = ("simple", "english")
# Only the newest this many matches of each ledger are ranked (ranking re-reads each one's text).
RANK_WINDOW = 200

_sql = queries.named("recall")


@dataclass(frozen=True, kw_only=True)
class Probe:
    terms: int  # tsquery nodes; 0: the query has no searchable word in this configuration
    recent_uses: int  # of the newest daybook entries examined, how many use the query's terms


async def probe(conn: asyncpg.Connection, agent_id: str, dictionary: str, query: str, *, recent_entries: int) -> Probe:
    row = await conn.fetchrow(_sql("probe"), agent_id, dictionary, query, recent_entries)
    assert row is not None  # a SELECT over a one-row CTE
    return Probe(terms=int(row["terms"]), recent_uses=int(row["recent_uses"]))


@dataclass(frozen=True, kw_only=True)
class Hit(rows.Row):
    """One matching record of any of the four ledgers, with its provenance from stored columns."""

    ledger: str  # daybook | facts | human_contact | living_summaries
    ref: str  # the row's id in its ledger, as text
    body: str
    author_kind: str  # agent | human
    owner: str | None  # the human who wrote it, where that is stored
    at: dt.datetime
    own_answer: bool  # the agent's own earlier answer (a daybook entry)
    derived: bool  # a living summary: derived, may lag the facts
    unchecked_blocks: list[str]
    rank: float


async def search(
    conn: asyncpg.Connection, agent_id: str, dictionary: str, query: str, *, limit: int, window: int = RANK_WINDOW
) -> list[Hit]:
    """The best `limit` of each ledger's newest `window` matches, best first. Planned with the
    configuration as a constant (a custom plan), so the expression index of that configuration
    can serve it."""
    async with conn.transaction(readonly=True):
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        return rows.all_of(Hit, await conn.fetch(_sql("search"), agent_id, dictionary, query, limit, window))
