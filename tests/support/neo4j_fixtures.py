"""pytest fixtures for a real Neo4j (imported by tests/conftest.py).

`neo4j_server_uri` starts one server for the session (tests.support.neo4j_server: Neo4j
Community from Maven Central, on Java 17) unless `WAKE_TEST_NEO4J_URI` names an existing one.
Without java or mvn the graph tests skip and say why; with `WAKE_REQUIRE_NEO4J=1` (set by
`.ci/run`) that skip is a failure instead. `neo4j_uri` empties the graph before each test;
`neo4j_dedicated` starts a server of the test's own, for a test that stops it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import neo4j
import pytest

from tests.support import neo4j_server


def _unavailable(reason: str) -> None:
    if os.environ.get("WAKE_REQUIRE_NEO4J") == "1":
        pytest.fail(f"WAKE_REQUIRE_NEO4J=1 but the Neo4j test server cannot run: {reason}", pytrace=False)
    pytest.skip(f"no Neo4j for the graph tests: {reason} (or set WAKE_TEST_NEO4J_URI)")


def _start(work_dir: Path) -> neo4j_server.Neo4jServer:
    reason = neo4j_server.java_and_maven_available()
    if reason:
        _unavailable(reason)
    try:
        return neo4j_server.Neo4jServer(work_dir).start()
    except (RuntimeError, TimeoutError, OSError) as exc:
        _unavailable(f"it did not start: {exc}")
        raise  # unreachable


@pytest.fixture(scope="session")
def neo4j_server_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    existing = os.environ.get("WAKE_TEST_NEO4J_URI")
    if existing:
        yield existing
        return
    server = _start(tmp_path_factory.mktemp("neo4j"))
    try:
        yield server.uri
    finally:
        server.stop()


def _clear(uri: str) -> None:
    with neo4j.GraphDatabase.driver(uri, auth=None) as driver:
        driver.execute_query("MATCH (n) DETACH DELETE n")


@pytest.fixture
def neo4j_uri(neo4j_server_uri: str) -> Iterator[str]:
    """The session's server with an empty graph (constraints and indexes are kept)."""
    _clear(neo4j_server_uri)
    yield neo4j_server_uri
    _clear(neo4j_server_uri)


@pytest.fixture
def neo4j_dedicated(tmp_path: Path) -> Iterator[Callable[[], neo4j_server.Neo4jServer]]:
    """Start a server of this test's own (a test that stops it must not stop the shared one)."""
    started: list[neo4j_server.Neo4jServer] = []

    def start() -> neo4j_server.Neo4jServer:
        server = _start(tmp_path / f"neo4j-{len(started)}")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
