"""Named SQL queries, kept in `ledgers/sql/<ledger>.sql`.

A file holds several queries, each introduced by a line `-- name: <query_name>`; the text up to
the next such line is the query. Keeping SQL in SQL files lets a test prepare every query against
a freshly migrated database, which proves the schema and the code agree.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import asyncpg

SQL_DIR = Path(__file__).resolve().parent / "sql"
_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def split_named(text: str, marker: re.Pattern[str], source: str) -> dict[str, str]:
    """The sections of `text` introduced by `marker` lines (whose one group is the name), stripped.
    Shared by the SQL files here and the Cypher files of `ledgers.graph`."""
    parts = marker.split(text)
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise ValueError(f"{source}: query {name!r} defined twice")
        found[name] = body.strip()
    return found


@functools.cache
def load(ledger: str) -> dict[str, str]:
    text = (SQL_DIR / f"{ledger}.sql").read_text(encoding="utf-8")
    return {name: body.rstrip(";") for name, body in split_named(text, _NAME, f"{ledger}.sql").items()}


def named(ledger: str) -> Callable[[str], str]:
    """The lookup of one ledger's named queries: `_sql = queries.named("facts")`, then `_sql("insert")`.
    The file is read once, on first use."""

    def sql(name: str) -> str:
        return load(ledger)[name]

    return sql


# Where a query with optional equality filters takes the ones given (`filtered`).
FILTERS_MARK = "/* filters */"
_COLUMN = re.compile(r"[a-z_]+")


@functools.cache
def filtered(sql: str, columns: tuple[str, ...], first: int) -> str:
    """`sql` with its `/* filters */` mark (after a `WHERE ...` of its own) replaced by
    `AND column = $n` for each of `columns`, numbered from `$first`.

    A filter written `($1::text IS NULL OR agent_id = $1)` makes one statement of every
    combination, and once PostgreSQL settles on that statement's generic plan it can use no index
    for it (docs/performance.md, "The console"). Here each combination is a statement of its own,
    with only the filters given in its WHERE, and plans with the index that fits it. The columns
    are the caller's names, never input; the values stay parameters."""
    if sql.count(FILTERS_MARK) != 1:
        raise ValueError(f"the query needs one {FILTERS_MARK} mark")
    for column in columns:
        if not _COLUMN.fullmatch(column):
            raise ValueError(f"not a column name: {column!r}")
    return sql.replace(FILTERS_MARK, " ".join(f"AND {c} = ${n}" for n, c in enumerate(columns, start=first)))


def all_queries() -> dict[str, str]:
    """Every named query of every ledger, keyed `ledger.name`."""
    return {
        f"{path.stem}.{name}": sql
        for path in sorted(SQL_DIR.glob("*.sql"))
        for name, sql in load(path.stem).items()
    }


Records = Iterable[Mapping[str, Any] | asyncpg.Record]


# The most rows of an agent a per-wake count reads (docs/performance.md, "Bounded counts"). A
# query counts at most COUNT_CAP + 1 rows (`SELECT count(*) FROM (SELECT 1 ... LIMIT $n) c`, with
# $n = `COUNT_READ`), so a count above COUNT_CAP means "more than COUNT_CAP", never that number.
COUNT_CAP = 1000
COUNT_READ = COUNT_CAP + 1


def capped(n: int) -> bool:
    """Whether a bounded count stopped at its cap: more rows match than it read."""
    return n > COUNT_CAP


def count_text(n: int) -> str:
    """A bounded count as an arrival renders it: the number, or "more than 1000" once capped."""
    return f"more than {COUNT_CAP}" if capped(n) else str(n)


def counted(records: Records, limit: int, *, total_column: str = "total") -> tuple[list[dict[str, object]], int]:
    """Rows of a query that selects its count as `total` (`count(*) OVER ()`, or a bounded count
    beside the rows), and that total.

    The COUNT is computed before the LIMIT, so the total is the number of matching rows (up to the
    bound of a bounded count: `count_text`), never the number shown (docs/design.md, "Lessons": a
    count that reported the LIMIT). It rides on the returned rows, so a LIMIT below 1 could not
    carry it and is refused. A generic helper of any query's rows, so mappings, not records: a
    ledger calls `rows.counted` to have them as its records, and the arrival's SQL sources
    (`wake.arrival.sql_sources`), whose columns an operator's query chooses, keep them as mappings.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1: the total rides on the returned rows")
    rows = [dict(r) for r in records]
    total = int(rows[0][total_column]) if rows else 0
    for row in rows:
        row.pop(total_column)
    return rows, total
