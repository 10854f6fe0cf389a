"""Shared fixtures: real PostgreSQL and Redis (embedded by default), a clean database per test.

`WAKE_TEST_PG_DSN` and `WAKE_TEST_REDIS_URL` point the suite at existing servers instead. Each
test gets its own database, copied from a migrated template, and an empty Redis database. With
`WAKE_TEST_PG_POOLER_DSN` too (a PgBouncer in transaction mode before that server,
tests/support/pooler.py), each test's database is reached through the pooler, and wake runs with
`postgres.pooler = "transaction"`.
Neo4j fixtures (`neo4j_uri`, `neo4j_dedicated`) come from tests/support/neo4j_fixtures.py, the
llama.cpp ones (`llama_url`, `llama_server_info`) from tests/support/llama_fixtures.py, Jaeger
(`jaeger`) from tests/support/jaeger_fixtures.py. The suite
runs on parallel workers (pytest-xdist), each with its own engines: tests/support/workers.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import textwrap
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import hypothesis
import pytest
import redis

from ledgers import schema
from tests.support import agents as agent_configs
from tests.support import basetemp as test_basetemp
from tests.support import databases as test_databases
from tests.support import environ as test_environ
from tests.support import pooler as test_pooler
from tests.support import workers
from tests.support.jaeger_fixtures import jaeger  # noqa: F401  (fixtures)
from tests.support.llama_fixtures import llama_server_info, llama_url  # noqa: F401  (fixtures)
from tests.support.neo4j_fixtures import neo4j_dedicated, neo4j_server_uri, neo4j_uri  # noqa: F401  (fixtures)
from tests.support.sentinel import cluster  # noqa: F401  (fixtures)
from wake import config as wake_config
from wake.stores import engines

TEMPLATE_DB = workers.template_database("wake_test_template")

# Property tests: no example database (it would be written into the checkout), no deadline (a
# loaded 2-core machine is slow, and a deadline would make a slow example a failure), and
# function-scoped fixtures allowed (a test's database is made once and reused across examples,
# each example cleaning what it wrote).
hypothesis.settings.register_profile(
    "wake",
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture, hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.load_profile("wake")


@pytest.fixture(autouse=True)
def _secrets_registered_by_this_test() -> Iterator[None]:
    """Every secret a test registers with the log redaction (`wake.logs.register_secret`, which
    reading a credential does) is forgotten when it ends: the registry is one per process, and a
    secret left from an earlier test on the same worker once redacted a later test's model text."""
    from wake import logs

    with logs._secrets_lock:
        before = set(logs._secrets)
    yield
    with logs._secrets_lock:
        logs._secrets.intersection_update(before)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--console-screenshots", metavar="DIR", default=None,
        help="Also keep the console's browser-test screenshots in DIR (docs/console/ holds the committed ones).",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """As root, a session given no `--basetemp` takes one outside pytest's per-user root, whose
    mode every other root session resets (tests/support/basetemp.py); xdist's workers inherit it."""
    if os.geteuid() == 0 and config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = str(test_basetemp.for_root_session())


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per core, at most workers.MAX_AUTO_WORKERS, or WAKE_TEST_WORKERS."""
    return workers.auto_workers(len(os.sched_getaffinity(0)))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before any test module is collected: the user's WAKE_*, PG*, REDIS_URL, DATABASE_URL,
    NEO4J_* and XDG_* are gone, the XDG homes point under the base temporary directory
    (tests/support/environ.py says which of the suite's own variables stay)."""
    factory: pytest.TempPathFactory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    test_environ.scrub_process(factory.getbasetemp() / "xdg")
    if test_pooler.active():
        test_pooler.route_session()
    # A run started in the background by a non-interactive shell (`pytest &`) inherits SIGINT
    # ignored, and so would every CLI child: the tests that interrupt one would wait on it forever.
    # A handler here is reset to the default in each child at exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Code a test runs in this process logs through structlog's defaults until a test configures it
    # (wake's commands and daemon always do): those render an exception with rich, the frames'
    # locals drawn in panels, which took 6.5 s for one failed wake's traceback. The defaults, but
    # for a plain traceback, as `wake.logs.configure` renders one.
    import structlog

    structlog.configure(processors=[
        *structlog.get_config()["processors"][:-1],
        structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback),
    ])


def _with_database(dsn: str, database: str) -> str:
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture(scope="session")
def services_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("services")


@pytest.fixture(scope="session")
def pg_server_dsn(services_dir: Path) -> str:
    """DSN of the server (its maintenance database), with the migrated template in place."""
    dsn = os.environ.get("WAKE_TEST_PG_DSN") or engines.start_postgres(services_dir)

    async def prepare() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE_DB}")
            await conn.execute(f"CREATE DATABASE {TEMPLATE_DB}")
        finally:
            await conn.close()
        conn = await asyncpg.connect(_with_database(dsn, TEMPLATE_DB))
        try:
            await schema.migrate(conn)
        finally:
            await conn.close()

    asyncio.run(prepare())
    return dsn


def _reached(server_dsn: str, name: str) -> str:
    """The DSN a test gets for its database: the server's, or through the pooler when one runs."""
    dsn = _with_database(server_dsn, name)
    pooler = os.environ.get(test_pooler.DSN_ENV)
    return test_pooler.through(dsn, pooler) if pooler else dsn


@pytest.fixture(scope="session")
def databases(pg_server_dsn: str) -> Iterator[test_databases.Databases]:
    """Each test's database, made one test ahead and dropped without the next test waiting."""
    made = test_databases.Databases(pg_server_dsn, TEMPLATE_DB)
    yield made
    made.close()


@pytest.fixture
def pg_dsn(pg_server_dsn: str, databases: test_databases.Databases) -> Iterator[str]:
    """A fresh, migrated database for this test alone."""
    name = databases.take()
    yield _reached(pg_server_dsn, name)
    databases.give_back(name)


@pytest.fixture
def empty_pg_dsn(pg_server_dsn: str, databases: test_databases.Databases) -> Iterator[str]:
    """A fresh database with no schema at all."""
    name = databases.copy_of("template0")
    yield _reached(pg_server_dsn, name)
    databases.give_back(name)


@pytest.fixture(scope="session")
def redis_server_url(services_dir: Path) -> str:
    external = os.environ.get("WAKE_TEST_REDIS_URL")
    if external:
        return workers.redis_url_for_worker(external, workers.worker_index())
    return engines.start_redis(services_dir)


@pytest.fixture
def redis_url(redis_server_url: str) -> Iterator[str]:
    client = redis.Redis.from_url(redis_server_url)
    client.flushdb()
    yield redis_server_url
    client.flushdb()
    client.close()


DEMO_TIERS = agent_configs.toml(tiers={
    "whisper": agent_configs.whisper("15m"),
    "surface": 'every = "1h"\nbinds = ["wake.whisper", "wake.surface"]',
    "full": 'cron = "30 3 * * *"\nbinds = ["wake"]',
}, extra=[agent_configs.PERSONA])


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    """Write a config file into tmp_path; returns its path."""

    def write(body: str = DEMO_TIERS, *, name: str = "wake.toml", persona: str = "You are a test agent.\n") -> Path:
        (tmp_path / "persona.md").write_text(persona)
        path = tmp_path / name
        path.write_text(textwrap.dedent(body))
        return path

    return write


@pytest.fixture
def store_config(write_config: Callable[..., Path], pg_dsn: str, redis_url: str, tmp_path: Path) -> Callable[..., wake_config.Config]:
    """A Config pointing at this test's database and Redis, with extra TOML appended."""

    def make(extra: str = "", agents: str = DEMO_TIERS, **environ: str) -> wake_config.Config:
        pooler = 'pooler = "transaction"\n' if test_pooler.active() else ""
        body = f'state_dir = "{tmp_path / "state"}"\n[postgres]\ndsn = "{pg_dsn}"\n{pooler}[redis]\nurl = "{redis_url}"\n{extra}\n{agents}'
        path = write_config(body)
        return wake_config.load_config_file(path, environ=environ)

    return make
