"""On parallel workers each session's engines are its own: the embedded PostgreSQL and Redis live
under this worker's base temporary directory, and the template database is named for the worker."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import asyncpg
import pytest

from tests import conftest
from tests.support import databases as test_databases
from tests.support import workers


async def test_this_workers_engines_and_template_are_its_own(
    pg_server_dsn: str, redis_server_url: str, pg_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    basetemp = tmp_path_factory.getbasetemp().resolve()
    wid = workers.worker_id()
    if wid != "main":
        assert basetemp.name == f"popen-{wid}"  # xdist gives each worker a base temporary directory of its own
    assert conftest.TEMPLATE_DB == ("wake_test_template" if wid == "main" else f"wake_test_template_{wid}")
    if not os.environ.get("WAKE_TEST_PG_DSN"):
        assert str(basetemp) in pg_server_dsn, pg_server_dsn  # the unix socket of this session's own server
    if not os.environ.get("WAKE_TEST_REDIS_URL"):
        assert str(basetemp) in redis_server_url, redis_server_url
    conn = await asyncpg.connect(pg_dsn)
    try:
        templates = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE 'wake_test_template%' ORDER BY datname")
    finally:
        await conn.close()
    names = [r["datname"] for r in templates]
    assert conftest.TEMPLATE_DB in names
    if not os.environ.get("WAKE_TEST_PG_DSN"):
        assert names == [conftest.TEMPLATE_DB]  # an embedded server serves one worker
    assert Path(os.environ["XDG_STATE_HOME"]).resolve().is_relative_to(basetemp)  # the scrubbed homes too


async def test_a_second_root_session_resetting_pytests_root_leaves_this_sessions_engines_running(
    pg_server_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What every new pytest session as root does to `<tmp>/pytest-of-root` (mode 0700 again) must
    not reach this session's PostgreSQL, which runs as pgserver's user (tests/support/basetemp.py)."""
    if os.geteuid() != 0 or os.environ.get("WAKE_TEST_PG_DSN"):
        pytest.skip("only a root session's embedded PostgreSQL runs as another user")
    basetemp = tmp_path_factory.getbasetemp().resolve()
    pytests_root = Path(tempfile.gettempdir()).resolve() / "pytest-of-root"
    assert not basetemp.is_relative_to(pytests_root), basetemp
    pytests_root.mkdir(mode=0o700, exist_ok=True)
    pytests_root.chmod(0o700)  # as a second session's getbasetemp() does
    conn = await asyncpg.connect(pg_server_dsn)
    try:
        # a new backend reads its data directory: it must still be reachable
        assert await conn.fetchval("SELECT count(*) FROM pg_class WHERE relname = 'pg_class'") == 1
        await conn.execute("CREATE TEMP TABLE reach (x int)")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


def test_old_runs_are_pruned_and_live_ones_kept(tmp_path: Path) -> None:
    from tests.support import basetemp as test_basetemp

    dead = 2 ** 22 + 12345  # above the default pid_max: no such process
    for i, pid in enumerate([os.getppid(), dead, dead + 1, dead + 2, dead + 3]):
        run = tmp_path / f"run-{pid}-0"
        run.mkdir()
        os.utime(run, (1_000_000 + i, 1_000_000 + i))
    (tmp_path / "not-a-run").mkdir()
    removed = test_basetemp.prune(tmp_path, keep=2)
    assert sorted(p.name for p in removed) == [f"run-{dead}-0", f"run-{dead + 1}-0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["not-a-run", f"run-{os.getppid()}-0", f"run-{dead + 2}-0", f"run-{dead + 3}-0"])


async def test_each_database_made_ahead_is_a_fresh_copy_of_the_template_and_a_given_back_one_is_dropped(pg_server_dsn: str) -> None:
    """tests/support/databases.py: the database made while the previous test ran is the template's
    copy as it is, whatever that test wrote into its own; a database given back is dropped."""
    made = test_databases.Databases(pg_server_dsn, conftest.TEMPLATE_DB)
    try:
        first = made.take()
        conn = await asyncpg.connect(conftest._with_database(pg_server_dsn, first))
        try:
            await conn.execute("CREATE TABLE written_by_the_first_test (x int)")
        finally:
            await conn.close()
        second = made.take()  # made while the first was in use
        assert second != first
        conn = await asyncpg.connect(conftest._with_database(pg_server_dsn, second))
        try:
            assert await conn.fetchval("SELECT to_regclass('written_by_the_first_test')") is None
            assert await conn.fetchval("SELECT to_regclass('wake_introspection_ledger')") is not None  # migrated, as the template
        finally:
            await conn.close()
        made.give_back(first)
        made.give_back(second)
    finally:
        made.close()  # waits for the drops and drops the spare
    conn = await asyncpg.connect(pg_server_dsn)
    try:
        left = await conn.fetch("SELECT datname FROM pg_database WHERE datname = ANY($1::text[])", [first, second])
    finally:
        await conn.close()
    assert left == []
