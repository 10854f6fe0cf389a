"""Fixtures of the integration tests: the scripted model server (`server`), a connection to the
test's database (`conn`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from tests.support import approval_tools, replay_tools, think_tools
from tests.support.openai_server import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """The scripted OpenAI-compatible server, fresh for this test, with what the test tool modules
    recorded of earlier tests cleared."""
    think_tools.CALLS.clear()
    replay_tools.RAN.clear()
    approval_tools.CALLS.clear()
    with ScriptedServer() as s:
        yield s


@pytest.fixture
async def conn(pg_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """One connection to this test's database, closed after it."""
    connection = await asyncpg.connect(pg_dsn)
    try:
        yield connection
    finally:
        await connection.close()
