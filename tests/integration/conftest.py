"""Fixtures of the integration tests: the scripted model server (`server`)."""

from __future__ import annotations

from collections.abc import Iterator

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
