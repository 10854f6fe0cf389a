"""A real `WakeContext` for calling sources and tools directly in tests."""

from __future__ import annotations

import datetime as dt
import uuid

from wake.config import Config
from wake.run.cycle import WakeContext
from wake.stores import Stores


def wake_ctx(
    config: Config, stores: Stores, now: dt.datetime, *, agent_id: str = "demo", tier: str = "full",
    wake_id: uuid.UUID | None = None, fence: int | None = None,
) -> WakeContext:
    return WakeContext(
        config=config, stores=stores, agent_id=agent_id, tier=tier, trigger="manual", scheduled_for=None,
        wake_id=wake_id or uuid.uuid4(), now=now, binding=(), previous=None, previous_tier=None, tool_hashes={},
        fence=fence,
    )
