"""Named SQL queries, kept in `ledgers/sql/<ledger>.sql`.

A file holds several queries, each introduced by a line `-- name: <query_name>`; the text up to
the next such line is the query. Keeping SQL in SQL files lets a test prepare every query against
a freshly migrated database, which proves the schema and the code agree.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent / "sql"
_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@functools.cache
def load(ledger: str) -> dict[str, str]:
    text = (SQL_DIR / f"{ledger}.sql").read_text(encoding="utf-8")
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{ledger}.sql: query {name!r} defined twice")
        queries[name] = body.strip().rstrip(";")
    return queries


def all_queries() -> dict[str, str]:
    """Every named query of every ledger, keyed `ledger.name`."""
    return {
        f"{path.stem}.{name}": sql
        for path in sorted(SQL_DIR.glob("*.sql"))
        for name, sql in load(path.stem).items()
    }
