"""On parallel workers each session's engines are its own: the embedded PostgreSQL and Redis live
under this worker's base temporary directory, and the template database is named for the worker."""

from __future__ import annotations

import os
from pathlib import Path

import asyncpg
import pytest

from tests import conftest
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
