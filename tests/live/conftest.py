"""Fixtures of the live tests: a recording proxy in front of the session's llama.cpp server (`proxy`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.llama_fixtures import LiveLlama
from tests.support.recording_proxy import RecordingProxy


@pytest.fixture
def proxy(llama_server_info: LiveLlama) -> Iterator[RecordingProxy]:
    """A recording proxy to the live server, for this test."""
    with RecordingProxy(llama_server_info.root_url) as p:
        yield p
