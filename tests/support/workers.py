"""The suite on parallel workers (pytest-xdist): how many, and what each keeps to itself.

`python -m pytest` runs `-n auto --dist loadfile` ([tool.pytest.ini_options] addopts): each
test module runs whole on one worker. Each worker is its own pytest session in its own process,
under its own base temporary directory (`<basetemp>/popen-gwN`), so the session's servers are its
own: the embedded PostgreSQL and Redis, their sockets and state, the Neo4j and llama.cpp servers
(started by the first test on that worker that needs one), the scrubbed XDG homes and every
`tmp_path`. What two workers could still share is a server named from outside
(`WAKE_TEST_PG_DSN`, `WAKE_TEST_REDIS_URL`): there each worker takes its own template database
and its own Redis database number.

The modules go to the workers in the order `dispatch_order` gives (tests/conftest.py), with
xdist's own reordering off (`--no-loadscope-reorder` in addopts): the acceptance modules, then
integration, then unit, with the live model's modules spread among the first two. xdist's default
sends the modules with the most tests first, so a module of one or two long tests (a live model,
daemons) came last, and a worker that took it (a worker takes another module while its own has
two tests or fewer left) ended the suite alone. The short unit modules, last, even the workers
out. The live modules are spread rather than first: run first, the two workers each ran a
llama.cpp server at once, both wanting every core, and the suite took longer than before.

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


# The layers of tests/ in the order their modules go out; the live model's modules are spread
# among the first two (`dispatch_order`).
DISPATCH_LAYERS = ("acceptance", "integration", "unit")
SPREAD_LAYER = "live"


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _layer(module: str) -> str:
    parts = module.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def dispatch_order(nodeids: list[str]) -> list[int]:
    """The order to run `nodeids` in (indices into it), module by module, each module's tests
    together and in their order: the acceptance modules, then integration, then unit (a path
    outside them last), as collected within each; and the live model's modules spread evenly
    among the acceptance and integration ones, so that a worker running one is more likely to meet
    a test waiting on its daemons than the other live model (a llama.cpp server each, both wanting
    every core)."""
    modules: dict[str, list[int]] = {}
    for i, nodeid in enumerate(nodeids):
        modules.setdefault(_module(nodeid), []).append(i)
    rank = {layer: n for n, layer in enumerate(DISPATCH_LAYERS)}
    spread = [m for m in modules if _layer(m) == SPREAD_LAYER]
    order = sorted((m for m in modules if _layer(m) != SPREAD_LAYER), key=lambda m: rank.get(_layer(m), len(DISPATCH_LAYERS)))
    span = sum(1 for m in order if rank.get(_layer(m), len(DISPATCH_LAYERS)) < 2)
    for n, module in reversed(list(enumerate(spread))):
        order.insert(round((n + 0.5) * span / len(spread)), module)
    return [i for module in order for i in modules[module]]


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
