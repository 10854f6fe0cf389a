"""A store that fails under the daemon's start is one line and exit 69, not a traceback and exit 1.

The chaos run (seed 90417) found a replica that exited 1 with a traceback: Redis reset its
connection while the start closed abandoned rows under the agents' leases
(`Daemon._close_abandoned_at_start`), and the raw `redis.exceptions.ConnectionError` escaped
the CLI's translation. `stores.outage` names the outage it is; the errors here are real ones,
from real clients against a loopback socket that closes every connection it accepts.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
import redis.exceptions

from wake import errors, stores


@pytest.fixture
def resetting_port() -> Iterator[int]:
    """A loopback port whose server accepts each connection and closes it at once."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join(timeout=5)
    server.close()


def _stores() -> Any:
    return SimpleNamespace(redis_address="127.0.0.1:6390", pg_address="127.0.0.1:5499")


async def _redis_error(port: int) -> BaseException:
    client = aioredis.Redis(host="127.0.0.1", port=port, socket_timeout=2, socket_connect_timeout=2)
    try:
        await client.ping()
    except BaseException as exc:  # noqa: BLE001  # the error itself is what the test reads
        return exc
    finally:
        await client.aclose()
    raise AssertionError("a server that closes every connection answered PING")


async def _pg_error(port: int) -> BaseException:
    try:
        await asyncpg.connect(host="127.0.0.1", port=port, user="x", database="x", timeout=2, ssl=False)
    except BaseException as exc:  # noqa: BLE001
        return exc
    raise AssertionError("a server that closes every connection accepted a PostgreSQL login")


def test_a_redis_connection_reset_is_redis_unavailable(resetting_port: int) -> None:
    exc = asyncio.run(_redis_error(resetting_port))
    assert isinstance(exc, redis.exceptions.RedisError)
    found = stores.outage(_stores(), exc)
    assert isinstance(found, errors.StoreUnavailable)
    assert found.exit_code == 69 and "redis" in str(found) and "127.0.0.1:6390" in str(found)


def test_a_postgres_connection_lost_is_postgres_unavailable(resetting_port: int) -> None:
    exc = asyncio.run(_pg_error(resetting_port))
    found = stores.outage(_stores(), exc)
    assert isinstance(found, errors.StoreUnavailable)
    assert found.exit_code == 69 and "postgres" in str(found) and "127.0.0.1:5499" in str(found)


def test_what_is_no_outage_is_left_as_it_was() -> None:
    assert stores.outage(_stores(), ValueError("a bug")) is None
    assert stores.outage(_stores(), asyncpg.UniqueViolationError("duplicate key")) is None
    already = errors.StoreUnavailable("redis", "here", "down")
    assert stores.outage(_stores(), already) is already
