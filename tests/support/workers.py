"""The suite on parallel workers (pytest-xdist): how many, and what each keeps to itself.

`python -m pytest` runs `-n auto --dist loadfile` ([tool.pytest.ini_options] addopts): each
test module runs whole on one worker. Each worker is its own pytest session in its own process,
under its own base temporary directory (`<basetemp>/popen-gwN`), so the session's servers are its
own: the embedded PostgreSQL and Redis, their sockets and state, the Neo4j and llama.cpp servers
(started by the first test on that worker that needs one), the scrubbed XDG homes and every
`tmp_path`. What two workers could still share is a server named from outside
(`WAKE_TEST_PG_DSN`, `WAKE_TEST_REDIS_URL`): there each worker takes its own template database
and its own Redis database number.

No test relies on an `xdist_group`: with pytest 9.2 and pytest-xdist 3.8 `--dist loadgroup`
drops the groups without a word (xdist writes the group into a node id field pytest no longer
reads). Every server a test uses is its own worker's, so none needs one.
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
        return f"unix://{parts.netloc}{parts.path}?{urllib.parse.urlencode(query, doseq=True)}"
    db = int(parts.path.strip("/") or 0) + index
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))
