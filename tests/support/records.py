"""Ledger records for unit tests that need one without a database: as `ledgers.introspection` reads them."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from ledgers.introspection import Compared, WakeRecord


def wake_record(**columns: Any) -> WakeRecord:
    """A `WakeRecord` with the given columns; the others as a settled row with no model call has them."""
    row: dict[str, Any] = {
        "wake_id": uuid.uuid4(), "agent_id": "demo", "tier": "whisper", "trigger": "manual", "scheduled_for": None, "status": "completed",
        "started_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "finished_at": None, "manifest_root": None, "blocks": {},
        "active_tools_count": 0, "active_tool_names": [], "tool_hashes": {}, "registry_tool_count": 0, "fence": None, "host": "test",
        "pid": 0, "version": "0", "config_hash": "", "diff": None, "note": None, "error": None, "model": None, "prompt_tokens": 0,
        "completion_tokens": 0, "cached_tokens": 0, "cost_usd": Decimal(0), "turns": 0, "tool_calls": 0, "refusals": 0,
        "stop_reason": None, "final_text": None, "escalation_cause": None, "unchecked_absence_claims": 0, "chain_seq": None,
        "chain": None, "arrival_order": [], "peak_pressure": None, "transcript_root": None,
    }
    return WakeRecord.from_row({**row, **columns})


def compared(**columns: Any) -> Compared:
    """The columns a new wake compares with (`introspection.Compared`) of `wake_record(**columns)`."""
    return Compared.from_row(wake_record(**columns).columns())
