"""The suite on parallel workers (pytest-xdist): how many, what each keeps to itself, what runs together.

`python -m pytest` runs `-n auto --dist loadgroup` ([tool.pytest.ini_options] addopts). Each
worker is its own pytest session in its own process, under its own base temporary directory
(`<basetemp>/popen-gwN`), so its embedded PostgreSQL and Redis, their sockets and state, the
scrubbed XDG homes and every `tmp_path` are its own. What two workers could still share is a
server named from outside (`WAKE_TEST_PG_DSN`, `WAKE_TEST_REDIS_URL`): there each worker takes its
own template database and its own Redis database number.

Tests that need a server the session starts once (Neo4j, llama.cpp) run on one worker together
(an `xdist_group`), so the server starts once, not once per worker, and no two tests share its
graph or its one slot at the same time. Tests marked `serial` all run on one worker, one after
another, never beside each other (`tests/conftest.py`, `pytest_collection_modifyitems`).
"""

from __future__ import annotations

import os
import re
import urllib.parse

import pytest

# At most this many workers from `-n auto`: each starts its own PostgreSQL and Redis, and the daemon
# and CLI tests start processes of their own; past one worker per core they wait on each other.
MAX_AUTO_WORKERS = 4
WORKERS_ENV = "WAKE_TEST_WORKERS"  # an explicit count for `-n auto` (tests/support/environ.py keeps it)

# A fixture -> the group of the tests that use it: they run on one worker, one after another.
GROUP_OF_FIXTURE = {
    "neo4j_server_uri": "neo4j",  # one Neo4j for the session; neo4j_uri empties its graph per test
    "llama_server_info": "llama",  # one llama.cpp server with one slot (`-np 1`)
}
SERIAL_GROUP = "serial"


def auto_workers(cpus: int | None, environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """How many workers `-n auto` starts: WAKE_TEST_WORKERS if set, else one per core, capped."""
    explicit = environ.get(WORKERS_ENV, "").strip()
    if explicit:
        if not explicit.isdigit():
            raise pytest.UsageError(f"{WORKERS_ENV} must be a whole number of workers (0 runs the tests in this process), not {explicit[:40]!r}")
        return int(explicit)
    return max(1, min(cpus or 1, MAX_AUTO_WORKERS))


def worker_id() -> str:
    """This process's xdist worker ('gw0', 'gw1', ...), or 'main' when the tests run in-process."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def worker_index() -> int:
    found = re.fullmatch(r"gw(\d+)", worker_id())
    return int(found.group(1)) if found else 0


def template_database(base: str) -> str:
    """The migrated template's name for this worker: two workers on one external server must not
    drop each other's template."""
    wid = worker_id()
    return base if wid == "main" else f"{base}_{wid}"


def redis_url_for_worker(url: str, index: int) -> str:
    """The same Redis with the database number moved up by `index`: the per-test flush of one
    worker must not empty another's keys. `redis://host/N`, `rediss://...` and `unix://path?db=N`."""
    if index == 0:
        return url
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "unix":
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        db = int(query.get("db", ["0"])[0] or 0) + index
        query["db"] = [str(db)]
        return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query, doseq=True)))
    db = int(parts.path.strip("/") or 0) + index
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


def assign_groups(items: list[pytest.Item]) -> None:
    """Put the tests of one session-started server into that server's group, and the `serial`
    ones into theirs (an explicit `xdist_group` mark wins)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
            continue
        fixtures = set(getattr(item, "fixturenames", ()))
        for fixture, group in GROUP_OF_FIXTURE.items():
            if fixture in fixtures:
                item.add_marker(pytest.mark.xdist_group(group))
                break
