"""Each test's database, made one test ahead (the `pg_dsn` fixture of tests/conftest.py).

A test gets a database of its own, copied from the worker's migrated template: `CREATE DATABASE
... TEMPLATE` writes the template's 10 MB again, about 0.1 s here, and each create and drop took a
new event loop and connection besides. `Databases` keeps one connection to the server's
maintenance database on a thread of its own, makes the next test's database while the current test
runs, and drops a finished test's database without the next test waiting for it. What a test gets
is the same: a fresh copy of the template that no other test has touched.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import asyncpg

T = TypeVar("T")
_WAIT_S = 120.0  # a create or drop on a loaded 2-core machine, with margin


class Databases:
    """Databases copied from `template` on the server at `server_dsn` (its maintenance database)."""

    def __init__(self, server_dsn: str, template: str) -> None:
        self._dsn, self._template = server_dsn, template
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="test-databases", daemon=True)
        self._thread.start()
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()  # one statement at a time on the one connection (used on the thread's loop only)
        self._spare: concurrent.futures.Future[str] | None = None
        self._drops: list[concurrent.futures.Future[None]] = []

    def take(self) -> str:
        """A fresh copy of the template, for one test; the next one is made meanwhile."""
        spare, self._spare = self._spare, None
        try:
            name = spare.result(_WAIT_S) if spare is not None else self._now(self._create(self._template))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):  # made before the server went away: make it again
            name = self._now(self._create(self._template))
        self._spare = self._submit(self._create(self._template))
        return name

    def copy_of(self, template: str) -> str:
        """A fresh copy of another template (`template0`: no schema), made now."""
        return self._now(self._create(template))

    def give_back(self, name: str) -> None:
        """Drop a test's database (with whatever connections it left), without waiting for it."""
        self._drops = [d for d in self._drops if not d.done()]
        self._drops.append(self._submit(self._execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")))

    def close(self) -> None:
        """Drop the spare, wait for the drops, close the connection and the thread."""
        if self._spare is not None:
            try:
                self.give_back(self._spare.result(_WAIT_S))
            except Exception:  # noqa: BLE001 - the server is gone: nothing is left to drop
                pass
        for drop in self._drops:
            try:
                drop.result(_WAIT_S)
            except Exception:  # noqa: BLE001 - as above
                pass
        if self._conn is not None:
            self._now(self._conn.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_WAIT_S)
        self._loop.close()

    async def _create(self, template: str) -> str:
        name = f"wake_test_{uuid.uuid4().hex[:12]}"
        await self._execute(f"CREATE DATABASE {name} TEMPLATE {template}")
        return name

    async def _execute(self, sql: str) -> None:
        async with self._lock:
            for attempt in (1, 2):
                if self._conn is None or self._conn.is_closed():
                    self._conn = await asyncpg.connect(self._dsn)
                try:
                    await self._conn.execute(sql)
                    return
                except (OSError, asyncpg.InterfaceError, asyncpg.AdminShutdownError, asyncpg.CannotConnectNowError):
                    if attempt == 2:
                        raise
                    self._conn = None  # the server restarted under this connection (a test stopped it): connect again

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _now(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._submit(coro).result(_WAIT_S)
