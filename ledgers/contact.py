"""`human_contact`: raw messages from humans, verbatim. A `saw` fact cites one and is attested
against its body (`ledgers.attestation`)."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import cast

import asyncpg

from ledgers import queries, rows

_sql = queries.named("contact")


async def record(
    conn: asyncpg.Connection, *, agent_id: str, author: str, channel: str, body: str, received_at: dt.datetime,
    message_id: uuid.UUID | None = None,
) -> uuid.UUID | None:
    """Store one message; returns its id, or None when `message_id` was already stored."""
    return cast("uuid.UUID | None", await conn.fetchval(_sql("record"), message_id, agent_id, author, channel, body, received_at))


@dataclass(frozen=True, kw_only=True)
class Message(rows.Row):
    """One message a human wrote to the agent, verbatim."""

    message_id: uuid.UUID
    agent_id: str
    author: str
    channel: str
    body: str
    received_at: dt.datetime


async def get(conn: asyncpg.Connection, agent_id: str, message_id: uuid.UUID) -> Message | None:
    return rows.one_of(Message, await conn.fetchrow(_sql("get"), message_id, agent_id))


async def last_received(conn: asyncpg.Connection, agent_id: str) -> dt.datetime | None:
    """When a human last wrote to the agent; None when no human ever has."""
    value: dt.datetime | None = await conn.fetchval(_sql("last_received"), agent_id)
    return value
