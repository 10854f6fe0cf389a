"""A test's stores, ready: opened over the test's PostgreSQL and Redis with the schema in place
(`ready_stores`), or with the config's registry too, as a wake's session (`ready_session`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from wake import stores
from wake.config import Config
from wake.run import session
from wake.stores import prepared


@contextlib.asynccontextmanager
async def ready_stores(config: Config, **kw: Any) -> AsyncIterator[stores.Stores]:
    """`stores.connected(config, **kw)` with the schema prepared."""
    async with stores.connected(config, **kw) as st:
        await prepared.prepare_schema(st)
        yield st


@contextlib.asynccontextmanager
async def ready_session(config: Config) -> AsyncIterator[session.Session]:
    """The test's stores, ready, and the config's registry."""
    async with ready_stores(config) as st:
        yield session.Session(config=config, stores=st, registry=session.build_registry(config))


async def prepare(config: Config) -> None:
    """The schema in place in the test's database, the stores closed again."""
    async with ready_stores(config):
        pass
