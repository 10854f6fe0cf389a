"""Stores: real engines, clear errors naming the store, the address and why."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from wake import stores
from wake.config import Config
from wake.errors import StoreUnavailable


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_open_stores_reaches_postgres_and_redis(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with stores.connected(config) as st:
        async with st.pg_conn() as conn:
            assert await conn.fetchval("SELECT 41 + 1") == 42
        assert await st.redis.ping() is True
        assert st.neo4j is None and st.neo4j_address is None
        assert st.embedded == ()


async def test_unreachable_postgres_names_store_address_and_reason(store_config: Callable[..., Config]) -> None:
    port = _closed_port()
    config = store_config(WAKE_POSTGRES__DSN=f"postgresql://wake:topsecret@127.0.0.1:{port}/wake", WAKE_POSTGRES__CONNECT_TIMEOUT_S="2")
    with pytest.raises(StoreUnavailable) as caught:
        await stores.open_stores(config)
    message = str(caught.value)
    assert message.startswith(f"postgres unreachable at postgresql://wake:***@127.0.0.1:{port}/wake: ")
    assert "refused" in message.lower()
    assert "topsecret" not in message


async def test_unreachable_redis_names_store_address_and_reason(store_config: Callable[..., Config]) -> None:
    port = _closed_port()
    config = store_config(WAKE_REDIS__URL=f"redis://:pw123456@127.0.0.1:{port}/0")
    with pytest.raises(StoreUnavailable) as caught:
        await stores.open_stores(config)
    assert str(caught.value).startswith(f"redis unreachable at redis://:***@127.0.0.1:{port}/0: ")
    assert "pw123456" not in str(caught.value)


async def test_unreachable_neo4j_names_store(store_config: Callable[..., Config]) -> None:
    port = _closed_port()
    config = store_config(NEO4J_URI=f"bolt://127.0.0.1:{port}", WAKE_NEO4J__TIMEOUT_S="2")
    with pytest.raises(StoreUnavailable) as caught:
        await stores.open_stores(config)
    assert str(caught.value).startswith(f"neo4j unreachable at bolt://127.0.0.1:{port}: ")


async def test_acquire_timeout_is_explicit(store_config: Callable[..., Config]) -> None:
    config = store_config(WAKE_POSTGRES__POOL_MAX_SIZE="1", WAKE_POSTGRES__ACQUIRE_TIMEOUT_S="0.2")
    async with stores.connected(config) as st:
        async with st.pg_conn():
            with pytest.raises(StoreUnavailable, match=r"no pooled connection within 0.2s"):
                async with st.pg_conn():
                    pass
