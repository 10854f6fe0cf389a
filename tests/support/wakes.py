"""Running one wake from a test: `cycle.run_wake(session, request)` with the test's stores (`run`), or
over stores it opens ready and closes again (`once`), and reading a wake's row back (`record`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from ledgers import introspection
from surfaces.registry import Registry
from tests.support import sessions
from wake import clock
from wake import stores as wake_stores
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


async def once(config: Config, **kw: Any) -> cycle.WakeOutcome:
    """`run`'s wake over the test's stores, opened ready for it and closed after."""
    async with sessions.ready_stores(config) as st:
        return await run(config, st, **kw)


async def record(config: Config, wake_id: Any) -> introspection.WakeRecord:
    """The wake's row in the introspection ledger, which must be there."""
    async with wake_stores.connected(config) as st, st.pg_conn() as conn:
        row = await introspection.get(conn, wake_id)
    assert row is not None
    return row
