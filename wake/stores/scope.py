"""The tool connections: a pool per agent that logs in as that agent's role (a member of the
database's tool role), each connection bound to its agent before its user gets it (`ledgers.scope`, docs/isolation.md).

The harness's own connections (`Stores.pg_conn`) keep the configured login, which owns the tables
and so sees every agent: status, the ledger commands, the scheduler. Only what a tool or an arrival
source reaches through `ToolContext.read()`/`.write()` comes from here.

The pool is opened on first use, after `ledgers.scope.setup` (once per process). The login role
is the scope: a connection of the pool sees its agent's rows from its first statement, with no
binding written per backend (so it holds through a pooler in transaction mode as well).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

import asyncpg

from ledgers import scope
from wake.errors import StoreUnavailable

if TYPE_CHECKING:
    from wake.stores import Stores



class ToolPool:
    """The tool connections of one `Stores`: a pool per agent, each logging in as that agent's role
    (so that two agents' tools are two roles: neither reads the other's session activity nor
    signals its backend), each opened on the agent's first use."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.pools: dict[str, asyncpg.Pool] = {}
        self.role: str | None = None  # the tool role every agent's role inherits from, once set up
        self._opening = asyncio.Lock()

    async def _open(self, stores: Stores, agent_id: str) -> asyncpg.Pool:
        async with self._opening:
            if agent_id in self.pools:
                return self.pools[agent_id]
            async with stores.pg_conn() as conn:
                try:
                    self.role = await scope.login(conn) or await scope.setup(conn)
                    role, password = await scope.enter(conn, agent_id)
                except asyncpg.InsufficientPrivilegeError as exc:
                    raise StoreUnavailable("postgres (tool role)", stores.pg_address,
                                           f"cannot set up the tool role: {exc}; the configured login needs CREATEROLE") from exc
            from wake.stores import PG_UNREACHABLE, _reason, connect_options

            try:
                pool = await asyncpg.create_pool(
                    self.dsn, user=role, password=password, min_size=0, max_size=stores.config.postgres.pool_max_size,
                    **connect_options(stores.config, "wake-tool"),
                )
            except (*PG_UNREACHABLE, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                raise StoreUnavailable("postgres (tool role)", stores.pg_address, _reason(exc)) from exc
            assert pool is not None
            self.pools[agent_id] = pool
            return pool

    @contextlib.asynccontextmanager
    async def conn(self, stores: Stores, agent_id: str) -> AsyncIterator[asyncpg.Connection]:
        """A tool connection whose backend sees only `agent_id`'s rows; always fully reset on release."""
        from wake.stores import PG_UNREACHABLE, _reason

        pool = self.pools.get(agent_id) or await self._open(stores, agent_id)
        timeout_s = stores.config.postgres.acquire_timeout_s
        try:
            conn_cm = pool.acquire(timeout=timeout_s)
            conn = await conn_cm.__aenter__()
        except TimeoutError as exc:
            raise StoreUnavailable("postgres", stores.pg_address, f"no pooled tool connection within {timeout_s}s") from exc
        except PG_UNREACHABLE as exc:
            raise StoreUnavailable("postgres", stores.pg_address, _reason(exc)) from exc
        try:
            yield cast(asyncpg.Connection, conn)
        except (asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError, asyncpg.AdminShutdownError) as exc:
            raise StoreUnavailable("postgres", stores.pg_address, _reason(exc)) from exc
        finally:
            await conn_cm.__aexit__(None, None, None)

    async def close(self) -> None:
        for pool in self.pools.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pool.close(), timeout=5)
        self.pools.clear()
