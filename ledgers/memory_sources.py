"""What a memory write's provenance is checked against from the ledgers: the humans' messages
(`human_contact`); the tool results are the wake's own conversation (`memory.provenance`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("memory_sources")


@dataclass(frozen=True, kw_only=True)
class Said(rows.Row):
    """A human's message, as far as provenance reads it."""

    message_id: uuid.UUID
    body: str


async def human_messages(conn: asyncpg.Connection, agent_id: str, limit: int) -> list[Said]:
    """The agent's `limit` newest messages from humans, newest first."""
    return rows.all_of(Said, await conn.fetch(_sql("human_messages"), agent_id, limit))
