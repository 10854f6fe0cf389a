"""PgBouncer in front of the test PostgreSQL, for the tests that run wake through it.

`WAKE_EXT_POOLER=pgbouncer tests/support/external_stores.sh start` runs Debian's PgBouncer in
transaction mode before the external PostgreSQL and exports `WAKE_TEST_PG_POOLER_DSN`: the same
login, through PgBouncer. `through` turns a test database's DSN into the same database through
it. Without PgBouncer, or without one started, the tests that need it skip and say why, except
with `WAKE_REQUIRE_PGBOUNCER=1` (CI), where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import urllib.parse
from typing import Any

import pytest

DSN_ENV = "WAKE_TEST_PG_POOLER_DSN"


def installed() -> bool:
    return shutil.which("pgbouncer") is not None or os.access("/usr/sbin/pgbouncer", os.X_OK)


def dsn_or_skip() -> str:
    """The DSN through PgBouncer (its maintenance database); skips, or fails when it is required."""
    dsn = os.environ.get(DSN_ENV)
    if not installed():
        reason = "PgBouncer is not installed (Debian: apt-get install pgbouncer)"
    elif not dsn:
        reason = (f"no PgBouncer runs before the test PostgreSQL ({DSN_ENV} unset): "
                  "WAKE_EXT_POOLER=pgbouncer tests/support/external_stores.sh start, and WAKE_TEST_PG_DSN from it")
    else:
        return dsn
    if os.environ.get("WAKE_REQUIRE_PGBOUNCER") == "1":
        pytest.fail(f"WAKE_REQUIRE_PGBOUNCER=1: {reason}")
    pytest.skip(reason)


def active() -> bool:
    """The suite runs wake through PgBouncer (tests/conftest.py points every test database there)."""
    return bool(os.environ.get(DSN_ENV))


def key() -> str:
    """The `[postgres]` line a test's own config file needs when the session runs through the pooler."""
    return 'pooler = "transaction"\n' if active() else ""


def route_session() -> None:
    """The whole session through the pooler: every config wake loads from the environment says so
    (`WAKE_POSTGRES__POOLER`, which a child inherits unless its test strips `WAKE_*`), and the
    tests' own asyncpg connections keep no prepared statement either, as wake's do not."""
    import asyncpg

    os.environ["WAKE_POSTGRES__POOLER"] = "transaction"
    for name in ("connect", "create_pool"):
        original = getattr(asyncpg, name)

        def uncached(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            kwargs.setdefault("statement_cache_size", 0)
            return _original(*args, **kwargs)

        setattr(asyncpg, name, uncached)


def through(dsn: str, pooler_dsn: str) -> str:
    """`dsn`'s database and login, at the pooler's address."""
    parts = urllib.parse.urlsplit(dsn)
    pooler = urllib.parse.urlsplit(pooler_dsn)
    host = pooler.netloc.rpartition("@")[2]
    login = parts.netloc.rpartition("@")[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{login}@{host}" if login else host))
