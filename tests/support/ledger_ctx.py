"""A real `WakeContext` for calling sources and tools directly in tests."""

from __future__ import annotations

import datetime as dt
import uuid

from wake.config import Config
from wake.context import WakeContext, WakeRequest
from wake.stores import Stores


def wake_ctx(
    config: Config, stores: Stores, now: dt.datetime, *, agent_id: str = "demo", tier: str = "full",
    wake_id: uuid.UUID | None = None, fence: int | None = None,
) -> WakeContext:
    request = WakeRequest(agent_id=agent_id, tier=tier, wake_id=wake_id or uuid.uuid4(), fence=fence)  # type: ignore[arg-type]
    return WakeContext(config=config, stores=stores, request=request, now=now)
