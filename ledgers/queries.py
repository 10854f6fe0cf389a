"""Named SQL queries, kept in `ledgers/sql/<ledger>.sql`.

A file holds several queries, each introduced by a line `-- name: <query_name>`; the text up to
the next such line is the query. Keeping SQL in SQL files lets a test prepare every query against
a freshly migrated database, which proves the schema and the code agree.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

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


T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")


@dataclass(frozen=True)
class Part(Generic[T]):
    """One ledger's read, run alone (`one`) or beside other ledgers' in one statement (`together`):
    its named query, which selects exactly one row (a row or an array of rows inside it comes as
    tuples, in the order of its `ROW(...)`), the query's arguments ($1 on, in its own text), and
    how the ledger turns that row into its records. Its columns are named after what they hold, so
    that no two parts of one statement share a name."""

    sql: str
    args: tuple[object, ...]
    decode: Callable[[asyncpg.Record], T]


async def one(conn: asyncpg.Connection, part: Part[T]) -> T:
    """The part read alone: one round trip."""
    row = await conn.fetchrow(part.sql, *part.args)
    if row is None:
        raise RuntimeError("a part's query must select exactly one row; it selected none")
    return part.decode(row)


@overload
async def together(conn: asyncpg.Connection, a: Part[A], b: Part[B], /) -> tuple[A, B]: ...
@overload
async def together(conn: asyncpg.Connection, a: Part[A], b: Part[B], c: Part[C], /) -> tuple[A, B, C]: ...
async def together(conn: asyncpg.Connection, *parts: Part[Any]) -> tuple[Any, ...]:
    """The parts read in one statement, one round trip where each alone costs one: each part's row
    side by side in one row (`SELECT * FROM (part) AS p1, (part) AS p2, ...`), which each part's
    ledger decodes from its own columns."""
    row = await conn.fetchrow(_together_sql(tuple((p.sql, len(p.args)) for p in parts)), *(a for p in parts for a in p.args))
    if row is None:
        raise RuntimeError("a part's query must select exactly one row; one selected none")
    return tuple(p.decode(row) for p in parts)


_PARAMETER = re.compile(r"\$(\d+)")


@functools.cache
def _together_sql(parts: tuple[tuple[str, int], ...]) -> str:
    """The parts' queries as one statement, each a subquery in FROM, its parameters renumbered to
    follow those of the parts before it (a part's text holds `$n` only as its parameters)."""
    subqueries, before = [], 0
    for n, (sql, count) in enumerate(parts, start=1):
        text = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))  # its comments say $n of its own numbering
        if max((int(m) for m in _PARAMETER.findall(text)), default=0) > count:
            raise ValueError(f"part {n} uses a parameter beyond its {count} arguments")
        subqueries.append(f"(\n{_shifted(text, before)}\n) AS part{n}")
        before += count
    return "SELECT * FROM " + ",\n".join(subqueries)


def _shifted(sql: str, by: int) -> str:
    return _PARAMETER.sub(lambda m: f"${int(m[1]) + by}", sql)


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
