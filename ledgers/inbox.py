"""The inbox's ledger: a human's message that came in through the daemon's endpoint, stored
verbatim in `human_contact` (the table `wake tell` writes) under its sender's idempotency key,
and, when the operator asked for it, a one-shot wake of the agent in the same transaction, at
most one per agent per interval across every replica."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import asyncpg

from ledgers import controls, queries

_sql = queries.named("inbox")
CREATED_BY = "inbox"  # the one-shots the inbox asks for (`wake at --list` shows it)


@dataclass(frozen=True, kw_only=True)
class Stored:
    message_id: uuid.UUID
    received_at: dt.datetime
    duplicate: bool  # the key was already recorded: this request stored nothing
    wake_id: uuid.UUID | None = None  # the one-shot it asked for, if any
    last_wake_at: dt.datetime | None = None  # when it did not ask: the inbox's last wake of the agent


@dataclass(frozen=True, kw_only=True)
class WakeAsk:
    tier: str
    min_interval_s: float


async def record(
    conn: asyncpg.Connection, *, agent_id: str, author: str, channel: str, body: str, received_at: dt.datetime, idempotency_key: str,
    wake: WakeAsk | None,
) -> Stored:
    """Store the message (or find the one this key stored) and ask for the wake, in one transaction."""
    async with conn.transaction():
        message_id = await conn.fetchval(_sql("record"), agent_id, author, channel, body, received_at, idempotency_key)
        if message_id is None:
            row = await conn.fetchrow(_sql("by_key"), agent_id, idempotency_key)
            assert row is not None
            return Stored(message_id=row["message_id"], received_at=row["received_at"], duplicate=True)
        if wake is None:
            return Stored(message_id=message_id, received_at=received_at, duplicate=False)
        await conn.execute(_sql("lock_agent"), agent_id)
        last: dt.datetime | None = await conn.fetchval(_sql("last_inbox_wake"), agent_id, CREATED_BY)
        if last is not None and received_at - last < dt.timedelta(seconds=wake.min_interval_s):
            return Stored(message_id=message_id, received_at=received_at, duplicate=False, last_wake_at=last)
        wake_id = uuid.uuid4()
        await controls.add_oneshot(
            conn, wake_id=wake_id, agent_id=agent_id, tier=wake.tier, fire_at=received_at, note=f"message {message_id} ({channel})",
            created_by=CREATED_BY, created_at=received_at,
        )
        return Stored(message_id=message_id, received_at=received_at, duplicate=False, wake_id=wake_id)
