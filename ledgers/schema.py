"""Migrations: ordered SQL files in `ledgers/migrations/`, applied under an advisory lock.

Files are named `NNNN_description.sql`; versions start at 1 and have no gaps. Each file runs in
its own transaction and is recorded in `schema_migrations` with its SHA-256. Each of those
transactions holds `pg_advisory_xact_lock(LOCK_KEY)`, so concurrent `wake migrate` runs apply each
file exactly once (a transaction's lock, not a session's: it holds through a pooler).
A database whose newest version is above the newest file this code ships is refused: newer code
wrote it, and this code cannot know what it means. After the files, `ledgers.scope.setup` gives
every agent table its row-level policy (docs/isolation.md).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from ledgers import scope
from ledgers.errors import SchemaMismatch

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
LOCK_KEY = 0x77616B65  # "wake"
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True, kw_only=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class MigrationState:
    version: int
    name: str
    applied_at: dt.datetime | None
    known: bool


def available(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    migrations = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE.match(path.name)
        if not match:
            raise SchemaMismatch(f"migration file {path.name} is not named NNNN_description.sql")
        migrations.append(Migration(version=int(match.group(1)), name=match.group(2), sql=path.read_text(encoding="utf-8")))
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise SchemaMismatch(f"migration {migration.version:04d}_{migration.name} found where {expected:04d} was expected")
    return migrations


def head() -> int:
    known = available()
    return known[-1].version if known else 0


async def _applied(conn: asyncpg.Connection) -> dict[int, asyncpg.Record]:
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not exists:
        return {}
    rows = await conn.fetch("SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version")
    return {row["version"]: row for row in rows}


def _check(applied: dict[int, asyncpg.Record], known: list[Migration]) -> None:
    known_by_version = {m.version: m for m in known}
    newest = max(applied, default=0)
    if newest > (known[-1].version if known else 0):
        raise SchemaMismatch(
            f"the database is at schema version {newest}, newer than this code knows ({len(known)}); "
            "upgrade wake before running it against this database"
        )
    for version, row in applied.items():
        if row["checksum"] != known_by_version[version].checksum:
            raise SchemaMismatch(
                f"migration {version:04d}_{row['name']} was changed after it was applied (checksum differs)"
            )


async def status(conn: asyncpg.Connection) -> list[MigrationState]:
    """Every migration, known or applied, with when it was applied (None when pending)."""
    known = available()
    applied = await _applied(conn)
    states = [
        MigrationState(version=m.version, name=m.name, applied_at=applied[m.version]["applied_at"] if m.version in applied else None, known=True)
        for m in known
    ]
    known_versions = {m.version for m in known}
    states += [
        MigrationState(version=v, name=row["name"], applied_at=row["applied_at"], known=False)
        for v, row in applied.items()
        if v not in known_versions
    ]
    return states


async def check(conn: asyncpg.Connection) -> int:
    """Raise `SchemaMismatch` unless the database is exactly at this code's head; returns it."""
    known = available()
    applied = await _applied(conn)
    _check(applied, known)
    version = max(applied, default=0)
    if version < head():
        raise SchemaMismatch(f"the database is at schema version {version}, this code needs {head()}; run `wake migrate`")
    return version


async def migrate(conn: asyncpg.Connection) -> list[Migration]:
    """Apply every pending migration, each in its own transaction, under the advisory lock.

    The lock is a transaction's (`pg_advisory_xact_lock`), taken again by each file's transaction,
    which looks once more whether the file is applied: a session's lock would stay behind on a
    server connection that a pooler in transaction mode hands to other clients. Two runs apply each
    file once and in order (each goes through the files in order)."""
    known = available()
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
        await conn.execute(_CREATE_TABLE)
        applied = await _applied(conn)
        _check(applied, known)
    done = []
    for migration in known:
        if migration.version in applied:
            continue
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
            if await conn.fetchval("SELECT 1 FROM schema_migrations WHERE version = $1", migration.version):
                continue  # another run applied it while this one waited for the lock
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                migration.version,
                migration.name,
                migration.checksum,
            )
        done.append(migration)
    # every agent table, those of the files just applied included, gets its row-level policy
    try:
        await scope.setup(conn)
    except asyncpg.InsufficientPrivilegeError as exc:
        raise SchemaMismatch(
            f"cannot set up the tool role and the agent tables' row-level policies: {exc}; "
            "the configured login must own the tables and may create roles (CREATEROLE)"
        ) from exc
    return done
