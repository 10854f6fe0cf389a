"""Running one wake from a test: `cycle.run_wake(session, request)` with the test's stores."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from surfaces.registry import Registry
from wake import clock
from wake.arrival.engine import Source
from wake.config import Config
from wake.context import WakeRequest
from wake.run import cycle, session
from wake.stores import Stores
from wake.think import client


async def run(
    config: Config, stores: Stores, registry: Registry | None = None, *, agent_id: str = "demo", tier: str = "whisper",
    models: client.Client | None = None, now: Callable[[], dt.datetime] = clock.now, dry_run: bool = False,
    source_list: Sequence[Source] | None = None, **request: Any,
) -> cycle.WakeOutcome:
    """One wake of `agent_id`/`tier`; `request` takes the other `WakeRequest` fields (fence, trigger, ...)."""
    s = session.Session(config=config, stores=stores, registry=registry or session.build_registry(config), models=models)
    return await cycle.run_wake(s, WakeRequest(agent_id=agent_id, tier=tier, **request), now=now, dry_run=dry_run, source_list=source_list)
