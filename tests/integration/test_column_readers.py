"""Every stored column has a reader (docs/design.md, "Invariants": no inert state).

For every column of every table in the schema, some named query in `ledgers/sql/*.sql` must read
it. PostgreSQL decides what a query reads, not a regex: each query's generic plan
(`EXPLAIN (VERBOSE, GENERIC_PLAN)`) names every column it touches as `table.column` (a
`SELECT *` is expanded into its columns), in its output lists, filters, join and sort keys and
RETURNING lists. The columns an INSERT writes or an UPDATE sets do not appear there, so a
write-only column fails this test. A column used only to find rows (in a WHERE or a join) counts:
it decides what the reader sees.
"""

from __future__ import annotations

import re

import asyncpg

from ledgers import queries

# table -> {column: why it may go without a named-query reader}. Keep this short; each entry
# is either read elsewhere for a stated reason, or a known defect named as such.
EXCEPTIONS: dict[str, dict[str, str]] = {
    "schema_migrations": {
        "version": "read by ledgers/schema.py (the runner), which must work before any ledger query exists",
        "name": "read by ledgers/schema.py (`wake migrate --status`), same reason",
        "checksum": "read by ledgers/schema.py to refuse an edited migration, same reason",
        "applied_at": "read by ledgers/schema.py (`wake migrate --status`), same reason",
    },
    "wake_seal_key": {
        "id": "read by the SQL function wake_seal() (migration 0022), which seals decisions and messages; no query may select it",
        "key": "read by wake_seal() only, same reason: the key never leaves the database",
    },
    "commitments": {
        c: "a known defect: written when a commitment closes, read by no command since `closed_recent` (which nothing called) went"
        for c in ("completed_at", "outcome", "wake_id")
    },
}

_NAME = r"[a-z_][a-z0-9_]*"
_QUALIFIED = re.compile(rf"(?<![\w.$'])({_NAME})\.({_NAME})\b(?!\s*\()")
_BARE = re.compile(rf"(?<![\w.$'])({_NAME})\b(?![.(])")
_LITERAL = re.compile(r"'(?:[^']|'')*'")
_RELATION_SCAN = re.compile(
    rf"(?:Seq Scan|Index Scan using \S+|Index Only Scan using \S+|Bitmap Heap Scan|Tid Scan|Tid Range Scan|Sample Scan)"
    rf" on public\.({_NAME})(?: ({_NAME}))?"
)


async def _plan_lines(conn: asyncpg.Connection, sql: str, name: str = "q") -> list[str]:
    """The generic plan of `sql`: PREPAREd, then EXPLAIN EXECUTE under force_generic_plan, so the
    parameters stay `$n` and no NULL is folded into the plan."""
    params = len((await conn.prepare(sql)).get_parameters())
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await conn.execute(f"PREPARE {name} AS {sql}")
    try:
        args = f"({', '.join(['NULL'] * params)})" if params else ""
        return [r[0] for r in await conn.fetch(f"EXPLAIN (VERBOSE) EXECUTE {name}{args}")]
    finally:
        await conn.execute(f"DEALLOCATE {name}")


def _reads(lines: list[str], columns: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(table, column) pairs a plan reads.

    Counted: every qualified `alias.column` in the plan's output lists, conditions, keys and
    RETURNING; in a plan over a single table, its bare column names too (PostgreSQL leaves them
    unqualified there). Not counted: the Output line of a relation scan below the top node (a scan
    may hand up the whole row, "physical tlist", whatever the query uses; the nodes above it list
    what is used), nor the values an INSERT writes (they show as `$n`).
    """
    aliases: dict[str, str] = {}
    scanned: set[str] = set()
    for line in lines:
        for table, alias in _RELATION_SCAN.findall(line) + re.findall(rf"(?:Insert|Update|Delete) on public\.({_NAME})(?: ({_NAME}))?", line):
            if table in columns:
                aliases[alias or table] = table
                aliases[table] = table
                scanned.add(table)
    only = next(iter(scanned)) if len(scanned) == 1 else None
    read = set()
    skipping = False
    for index, line in enumerate(lines):
        text = line.strip()
        is_node = index == 0 or text.startswith("->")
        if is_node:
            skipping = index > 0 and bool(_RELATION_SCAN.search(text))
            continue
        if skipping and text.startswith("Output:"):
            continue
        text = _LITERAL.sub("''", text)
        for alias, column in _QUALIFIED.findall(text):
            table = aliases.get(alias)
            if table is not None and column in columns[table]:
                read.add((table, column))
        if only is not None:
            read |= {(only, word) for word in _BARE.findall(text) if word in columns[only]}
    return read


async def test_every_ledger_column_is_read_by_a_named_query(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        columns = {
            (r["table_name"], r["column_name"])
            for r in await conn.fetch(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
            )
        }
        by_table: dict[str, set[str]] = {}
        for table, column in columns:
            by_table.setdefault(table, set()).add(column)
        read: set[tuple[str, str]] = set()
        for name, sql in queries.all_queries().items():
            lines = await _plan_lines(conn, sql)
            assert lines, name
            read |= _reads(lines, by_table)
    finally:
        await conn.close()
    excused = {(t, c) for t, cols in EXCEPTIONS.items() for c in cols}
    assert excused <= columns, f"exceptions name columns that do not exist: {sorted(excused - columns)}"
    unread = sorted(columns - read - excused)
    assert not unread, "columns no named query reads (inert state): " + ", ".join(f"{t}.{c}" for t, c in unread)
    needless = sorted(excused & read)
    assert not needless, f"these exceptions are read after all; drop them: {needless}"


async def test_the_check_sees_a_write_only_column(pg_dsn: str) -> None:
    """The instrument diverges: an INSERT-only column is not counted, a SELECT of it is."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("CREATE TABLE inert_probe (id bigserial PRIMARY KEY, written text, selected text, other_id bigint)")
        cols = {"inert_probe": {"id", "written", "selected", "other_id"}, "other": {"oid_", "label"}}
        await conn.execute("CREATE TABLE other (oid_ bigint PRIMARY KEY, label text)")
        insert = await _plan_lines(conn, "INSERT INTO inert_probe (written, selected) VALUES ($1, $2) RETURNING id")
        select = await _plan_lines(conn, "SELECT selected FROM inert_probe WHERE id = $1")
        update = await _plan_lines(conn, "UPDATE inert_probe SET written = $2 WHERE id = $1")
        star = await _plan_lines(conn, "SELECT * FROM inert_probe")
        join = await _plan_lines(conn, "SELECT p.selected, o.label FROM inert_probe p JOIN other o ON o.oid_ = p.other_id WHERE p.id > $1")
    finally:
        await conn.close()
    assert _reads(insert, cols) == {("inert_probe", "id")}
    assert _reads(select, cols) == {("inert_probe", "selected"), ("inert_probe", "id")}
    assert ("inert_probe", "written") not in _reads(update, cols)
    assert _reads(star, cols) == {("inert_probe", c) for c in ("id", "written", "selected", "other_id")}
    assert _reads(join, cols) == {
        ("inert_probe", "selected"), ("inert_probe", "other_id"), ("inert_probe", "id"), ("other", "label"), ("other", "oid_"),
    }
