"""Counting PostgreSQL round trips and commits: a real asyncpg connection that counts what it sends.

`counted_pools()` makes every pool the stores open use `CountingConnection` (the real connection
class, with two counters), so a test or a benchmark can say how many message exchanges and how
many commits one wake costs. A round trip is one simple query (`execute` without arguments:
BEGIN, COMMIT, the pool's reset) or one extended-protocol exchange (`fetch*`, `execute` with
arguments, `executemany`). A commit is an explicit COMMIT, or a write statement run outside a
transaction (it commits on its own).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import asyncpg

_WRITES = ("insert", "update", "delete", "with")


def _head(query: str) -> str:
    """The statement's first word, past any leading `--` comment lines."""
    lines = [line for line in query.lower().splitlines() if line.strip() and not line.lstrip().startswith("--")]
    return lines[0].lstrip() if lines else ""


class CountingConnection(asyncpg.Connection):  # type: ignore[misc]
    trips = 0
    commits = 0

    @classmethod
    def totals(cls) -> tuple[int, int]:
        return CountingConnection.trips, CountingConnection.commits

    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str:
        if not args:
            CountingConnection.trips += 1
            head = _head(query)
            if head.startswith("commit") or (not self.is_in_transaction() and head.startswith(_WRITES)):
                CountingConnection.commits += 1
        return str(await super().execute(query, *args, timeout=timeout))

    async def _execute(self, query: str, args: Any, limit: int, timeout: float | None, **kwargs: Any) -> Any:
        CountingConnection.trips += 1
        if not self.is_in_transaction() and _head(query).startswith(_WRITES):
            CountingConnection.commits += 1
        return await super()._execute(query, args, limit, timeout, **kwargs)

    async def _executemany(self, query: str, args: Any, timeout: float | None, **kwargs: Any) -> Any:
        CountingConnection.trips += 1
        return await super()._executemany(query, args, timeout, **kwargs)


@contextlib.contextmanager
def counted_pools() -> Iterator[type[CountingConnection]]:
    """Within the block, pools opened through `asyncpg.create_pool` count on `CountingConnection`."""
    original = asyncpg.create_pool

    def create_pool(*args: Any, **kwargs: Any) -> Any:
        return original(*args, connection_class=CountingConnection, **kwargs)

    asyncpg.create_pool = create_pool
    try:
        yield CountingConnection
    finally:
        asyncpg.create_pool = original
