"""pytest fixtures for a real Jaeger (imported by tests/conftest.py).

`jaeger` starts one server for the session (tests.support.jaeger_server: Jaeger's v1 all-in-one,
built once with Go into $WAKE_JAEGER_CACHE or ~/.cache/wake/jaeger, in-memory storage, on free
loopback ports). Where it is not built and cannot be, the trace tests skip and say why; with
`WAKE_REQUIRE_JAEGER=1` (set by `.ci/run`) that skip is a failure instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support import jaeger_server


def _unavailable(reason: str) -> None:
    if os.environ.get("WAKE_REQUIRE_JAEGER") == "1":
        pytest.fail(f"WAKE_REQUIRE_JAEGER=1 but the Jaeger test server cannot run: {reason}", pytrace=False)
    pytest.skip(f"no Jaeger for the trace tests: {reason} (build it: python -m tests.support.jaeger_server fetch)")


@pytest.fixture(scope="session")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jaeger_server.JaegerServer]:
    reason = jaeger_server.unavailable()
    if reason:
        _unavailable(reason)
    try:
        server = jaeger_server.JaegerServer(tmp_path_factory.mktemp("jaeger")).start()
    except (RuntimeError, TimeoutError, OSError) as exc:
        _unavailable(f"it did not build or start: {exc}")
        raise  # unreachable
    try:
        yield server
    finally:
        server.stop()
