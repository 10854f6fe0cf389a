"""What a settled wake delivers: one outbox entry per route in the tier's `deliver_to`.

Only a wake settled `completed` with a final text delivers; a quiet wake (the gate, the pre-check
or the tier's `ok_token`), a failed or a halted one sends nothing. The entries are written by
`wake.run.settle` in the transaction that settles the wake, under its fence; the daemon's sender
(`wake.daemon.outbox`) delivers them.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from ledgers import outbox
from ledgers.vocab import Status
from wake.config import Config


@dataclass(frozen=True, kw_only=True)
class Delivery:
    route: str
    payload: dict[str, Any]
    at: dt.datetime  # when the wake settled: the entry is due from then


def deliveries(
    config: Config, *, wake_id: uuid.UUID, agent_id: str, tier: str, trigger: str, status: str, final_text: str | None,
    manifest_root: str | None, settled_at: dt.datetime,
) -> list[Delivery]:
    """The entries a wake settling `status` queues (none unless it completed with a final text)."""
    routes = config.tier(agent_id, tier).deliver_to
    if status != Status.completed or not routes or not final_text or not final_text.strip():
        return []
    payload = {
        "wake_id": str(wake_id), "agent": agent_id, "tier": tier, "trigger": trigger, "status": status, "text": final_text,
        "manifest_root": manifest_root, "settled_at": settled_at.isoformat(),
    }
    return [Delivery(route=route, payload=payload, at=settled_at) for route in routes]


async def enqueue(conn: asyncpg.Connection, wake_id: uuid.UUID, agent_id: str, tier: str, queued: list[Delivery]) -> None:
    """Queue the deliveries in the caller's transaction (the settle's, under the fence)."""
    for d in queued:
        await outbox.enqueue(conn, wake_id=wake_id, route=d.route, agent_id=agent_id, tier=tier, payload=d.payload, at=d.at)
