"""`human_contact`: raw messages from humans, verbatim. A `saw` fact cites one and is attested
against its body (`ledgers.attestation`)."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import cast

import asyncpg

from ledgers import queries, rows
from ledgers.errors import MessageRefused

_sql = queries.named("contact")

# The longest message a human may leave (characters): a message is read whole into arrivals.
MESSAGE_MAX_CHARS = 100_000


def check_body(body: str) -> None:
    """Refuse (MessageRefused) a body that is empty, longer than MESSAGE_MAX_CHARS, or that holds
    a NUL (which a text column cannot store) or text that is not valid Unicode."""
    if not body.strip():
        raise MessageRefused("the message is empty")
    if len(body) > MESSAGE_MAX_CHARS:
        raise MessageRefused(f"the message is {len(body)} characters; at most {MESSAGE_MAX_CHARS} are kept")
    if "\x00" in body:
        raise MessageRefused(f"the message holds a NUL character (at {body.index(chr(0))} of {len(body)})")
    try:
        body.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MessageRefused(f"the message is not valid UTF-8 (at {exc.start} of {len(body)})") from exc


async def record(
    conn: asyncpg.Connection, *, agent_id: str, author: str, channel: str, body: str, received_at: dt.datetime,
    message_id: uuid.UUID | None = None,
) -> uuid.UUID | None:
    """Store one message; returns its id, or None when `message_id` was already stored. Raises
    `MessageRefused` for a body `check_body` refuses, and stores nothing then."""
    check_body(body)
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
    sealed: bool = True  # it carries a valid seal: `wake tell` or the inbox wrote it, and nobody changed it since


async def get(conn: asyncpg.Connection, agent_id: str, message_id: uuid.UUID) -> Message | None:
    return rows.one_of(Message, await conn.fetchrow(_sql("get"), message_id, agent_id))


async def last_received(conn: asyncpg.Connection, agent_id: str) -> dt.datetime | None:
    """When a human last wrote to the agent; None when no human ever has."""
    value: dt.datetime | None = await conn.fetchval(_sql("last_received"), agent_id)
    return value


@dataclass(frozen=True, kw_only=True)
class Unsealed:
    """A message without a valid seal: not written by `wake tell` or the inbox, or changed since."""

    message_id: uuid.UUID
    agent_id: str
    author: str
    channel: str
    received_at: dt.datetime


async def unsealed(conn: asyncpg.Connection, agent_id: str | None) -> list[Unsealed]:
    """The messages `wake verify --chain` names as unsealed."""
    return [Unsealed(**dict(r)) for r in await conn.fetch(_sql("unsealed"), agent_id)]
