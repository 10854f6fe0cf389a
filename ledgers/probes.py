"""`claim_probe_records`: one row per run of the claim-probe instrument.

Each row keeps the probe as asked (target, mode, needle, negate, the assertion text for the record
only), where it resolved, the verdict, the evidence, and whether the instrument passed its
dual-needle controls in that very run (`instrument_state`, `controls`). The schema refuses a
verdict other than `error` from an instrument that failed its controls.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from ledgers import queries, rows


@dataclass(frozen=True, kw_only=True)
class ProbeRecord(rows.Row):
    """One run of the instrument, as it is inserted and as `recent` reads it back (fields in the
    order of the table's columns)."""

    json_columns = ("evidence", "controls")

    id: uuid.UUID = field(default_factory=uuid.uuid4)
    agent_id: str
    wake_id: uuid.UUID | None = None
    retraction_id: uuid.UUID | None = None
    target: str
    resolved_path: str | None
    mode: str
    needle: str | None
    negate: bool
    assertion: str | None = None
    verdict: str
    evidence: dict[str, Any]
    instrument_state: str
    controls: list[dict[str, Any]] = field(default_factory=list)
    checked_at: dt.datetime


_sql = queries.named("probes")


async def insert(conn: asyncpg.Connection, record: ProbeRecord) -> uuid.UUID:
    await conn.execute(
        _sql("insert"),
        record.id, record.agent_id, record.wake_id, record.retraction_id, record.target, record.resolved_path,
        record.mode, record.needle, record.negate, record.assertion, record.verdict, json.dumps(record.evidence),
        record.instrument_state, json.dumps(record.controls), record.checked_at,
    )
    return record.id


async def recent(
    conn: asyncpg.Connection, *, agent_id: str | None = None, retraction_id: uuid.UUID | None = None, limit: int = 20
) -> list[ProbeRecord]:
    return rows.all_of(ProbeRecord, await conn.fetch(_sql("recent"), agent_id, retraction_id, limit))
