"""The commands that set up and check an installation: `wake migrate` (the schema) and `wake doctor`
(the config, the stores, the schema and the versions)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ledgers import schema
from wake import stores
from wake.cli import doctor, migrate, render
from wake.cli.app import Context, _StrParam, clip, ledger_conn, pass_ctx, run_async


class ExpectType(_StrParam):
    """`--expect AGENT[:TIER]=DURATION` (`doctor.Expectation`): malformed, one line (usage, exit 2)."""

    name = "AGENT[:TIER]=DURATION"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, doctor.Expectation):
            return value
        try:
            return doctor.Expectation.parse(str(value))
        except ValueError as exc:
            self.fail(f"{clip(str(value))}: {exc}", param, ctx)


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.option("--expect", "expects", type=ExpectType(), multiple=True,
              help="Only check that the tier (every tier of the agent without :TIER) settled a wake within DURATION "
                   "(30s, 15m, 2h, 1d); repeatable, at most 100. For an operator's cron when no replica runs the dead-man check.")
@pass_ctx
def doctor_cmd(ctx: Context, as_json: bool, expects: tuple[doctor.Expectation, ...]) -> None:
    """Check the config, each store's reachability and latency, the schema and the versions.

    Exits 1 if anything required (the config, PostgreSQL, Redis, Neo4j when configured, a tier's
    instructions file or pre-check, a webhook's secret, an MCP server that cannot start) fails.

    With --expect it checks only that: it prints one line per overdue tier (its newest wake that
    ran settled longer ago than DURATION, or never) and exits 1 if there is one, 0 silently if
    there is none; an agent or tier not configured is exit 65, PostgreSQL unreachable 69.
    """
    config = ctx.config
    if expects:
        _expected(config, list(expects), as_json)
    checks = run_async(lambda: doctor.run(config))
    if as_json:
        click.echo(json.dumps({"healthy": doctor.healthy(checks), "checks": doctor.as_json(checks)}, indent=2))
    else:
        click.echo(render.checks(checks))
    sys.exit(0 if doctor.healthy(checks) else 1)


def _expected(config: Any, expects: list[doctor.Expectation], as_json: bool) -> None:
    if len(expects) > doctor.MAX_EXPECTATIONS:
        raise click.UsageError(f"at most {doctor.MAX_EXPECTATIONS} --expect options, got {len(expects)}")
    from wake import clock

    async def body() -> list[str]:
        for e in expects:  # an unknown agent or tier is refused before any store is opened
            e.tiers(config)
        async with ledger_conn(config) as conn:
            return await doctor.overdue_lines(conn, config, expects, clock.now())

    lines = run_async(body)
    if as_json:
        click.echo(json.dumps({"overdue": lines}, indent=2))
    for line in [] if as_json else lines:
        click.echo(line)
    sys.exit(1 if lines else 0)


@click.command("migrate")
@click.option("--status", "show_status", is_flag=True, help="List the migrations and whether each is applied.")
@click.option("--json", "as_json", is_flag=True, help="With --status: print JSON.")
@pass_ctx
def migrate_cmd(ctx: Context, show_status: bool, as_json: bool) -> None:
    """Apply pending database migrations (safe to run concurrently), and, when Neo4j is
    configured, create the graph's missing constraints and indexes (idempotent)."""
    config = ctx.config

    async def body() -> Any:
        async with stores.connected(config, neo4j=False) as st, st.pg_conn() as conn:  # migrating is this command's job
            if show_status:
                return await schema.status(conn)
            return await schema.migrate(conn)

    result = run_async(body)
    graph_line = run_async(lambda: migrate.graph_schema(config, status_only=show_status)) if not (show_status and as_json) else None
    if show_status:
        if as_json:
            click.echo(json.dumps([
                {"version": s.version, "name": s.name, "applied_at": s.applied_at.isoformat() if s.applied_at else None, "known": s.known}
                for s in result
            ], indent=2))
            return
        for s in result:
            state = f"applied {s.applied_at:%Y-%m-%d %H:%M:%S%z}" if s.applied_at else "pending"
            unknown = "  (unknown to this code)" if not s.known else ""
            click.echo(f"{s.version:04d}  {s.name:<32}  {state}{unknown}")
        click.echo(graph_line or "graph: neo4j is not configured; no graph schema")
        return
    if result:
        for m in result:
            click.echo(f"applied {m.version:04d}_{m.name}")
    else:
        click.echo(f"schema is current (version {schema.head()})")
    click.echo(graph_line or "graph: neo4j is not configured; no graph schema")
