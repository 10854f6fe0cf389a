"""Operator-defined SQL sources (`[sql_sources.<name>]`, docs/facts.md).

Each is one SELECT with parameters taken from the wake context, run in a READ ONLY transaction
with its own `statement_timeout`; a statement that writes fails with a clear error, which the
arrival engine turns into a typed failed block ("could not check: ..."). At most `max_rows` rows
are rendered, one line each through `template`; the total beside them is an exact COUNT.
"""

from __future__ import annotations

import zoneinfo

import asyncpg

from ledgers import queries
from untrusted import spotlight
from wake.arrival.engine import CacheTier, Found, Source
from wake.config import SqlSourceConfig
from wake.context import WakeContext
from wake.errors import SqlSourceError

# The operator's SQL runs as a CTE, so a data-modifying statement reaches the READ ONLY check
# (and fails there with a clear message) instead of failing as a syntax error.
_WRAPPED = "WITH operator_source AS (\n{sql}\n) SELECT q.*, count(*) OVER () AS wake_total FROM operator_source q LIMIT ${limit}"


def param_value(name: str, ctx: WakeContext) -> object:
    if name == "agent_id":
        return ctx.agent_id
    if name == "tier":
        return ctx.tier
    if name == "trigger":
        return ctx.trigger
    if name == "timezone":
        return ctx.timezone
    if name == "now":
        return ctx.now
    if name == "local_date":
        return ctx.now.astimezone(zoneinfo.ZoneInfo(ctx.timezone)).date()
    if name == "wake_id":
        return ctx.wake_id
    raise SqlSourceError(f"unknown parameter {name!r}")


async def fetch(conn: asyncpg.Connection, name: str, conf: SqlSourceConfig, ctx: WakeContext) -> tuple[list[dict[str, object]], int]:
    """Run the source READ ONLY under its timeout: up to `max_rows` rows and the exact total."""
    args = [param_value(p, ctx) for p in conf.params]
    sql = _WRAPPED.format(sql=conf.sql.strip().rstrip(";"), limit=len(args) + 1)
    try:
        async with conn.transaction(readonly=True):
            await conn.execute(f"SET LOCAL statement_timeout = {int(conf.timeout_ms)}")
            records = await conn.fetch(sql, *args, conf.max_rows)
    except asyncpg.ReadOnlySQLTransactionError as exc:
        raise SqlSourceError(f"sql source {name!r} tried to write ({exc}); operator sources run in a READ ONLY transaction") from exc
    except asyncpg.QueryCanceledError as exc:
        raise SqlSourceError(f"sql source {name!r} timed out after {conf.timeout_ms} ms") from exc
    except asyncpg.PostgresError as exc:
        raise SqlSourceError(f"sql source {name!r} failed: {type(exc).__name__}: {exc}") from exc
    return queries.counted(records, conf.max_rows, total_column="wake_total")


def render_row(name: str, conf: SqlSourceConfig, row: dict[str, object], marks: spotlight.Marks) -> str:
    """The operator's template over one row; each text column is stored text, marked data
    (`untrusted.spotlight`), and one with a line break or a control character cannot begin a line."""
    shown = {k: marks.span(v) if isinstance(v, str) else v for k, v in row.items()}
    try:
        return conf.template.format_map(shown)
    except KeyError as exc:
        raise SqlSourceError(
            f"sql source {name!r}: template names column {exc.args[0]!r}, which the query does not return"
            f" (columns: {', '.join(row) or 'none'})"
        ) from None
    except (ValueError, TypeError) as exc:
        raise SqlSourceError(f"sql source {name!r}: template cannot format this row: {exc}") from exc


def render(name: str, conf: SqlSourceConfig, rows: list[dict[str, object]], total: int, marks: spotlight.Marks) -> str:
    lines = [conf.header] if conf.header else []
    if not rows:
        return "\n".join([*lines, conf.empty_text])
    lines += [render_row(name, conf, row, marks) for row in rows]
    if total > len(rows):
        lines.append(f"({len(rows)} of {total} shown)")
    return "\n".join(lines)


def source(name: str, conf: SqlSourceConfig) -> Source:
    async def run(ctx: WakeContext) -> Found:
        async with ctx.stores.pg_conn(trusted=False) as conn:
            rows, total = await fetch(conn, name, conf, ctx)
        return Found(text=render(name, conf, rows, total, spotlight.for_agent(ctx.agent_id)), rows=total)

    return Source(name=name, cache_tier=CacheTier[conf.cache_tier], fn=run)
