"""The `wake` command line. Every command has `--help`; expected failures print one line, no traceback.

Exit statuses follow sysexits: 78 bad config, 69 a store unreachable, 65 schema mismatch,
70 a malformed tool declaration, 1 anything else expected, 2 usage.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from ledgers import schema
from wake import __version__, doctor, logs, stores
from wake.config import Config, load_config
from wake.errors import SchemaError, WakeError

T = TypeVar("T")


def _fail(exc: WakeError) -> None:
    click.echo(f"wake: {exc}", err=True)
    sys.exit(exc.exit_code)


def _run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body; expected errors become one line and their exit status."""
    try:
        return asyncio.run(_translate(coro_fn))
    except WakeError as exc:
        _fail(exc)
        raise  # unreachable


async def _translate(coro_fn: Callable[[], Awaitable[T]]) -> T:
    try:
        return await coro_fn()
    except schema.SchemaMismatch as exc:
        raise SchemaError(str(exc)) from exc


class _Context:
    def __init__(self, config_path: str | None) -> None:
        self.config_path = config_path
        self._config: Config | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            try:
                self._config = load_config(self.config_path)
            except WakeError as exc:
                _fail(exc)
            assert self._config is not None
            logs.configure(self._config.log.format, self._config.log.level, stream=sys.stderr)
        return self._config


pass_ctx = click.make_pass_decorator(_Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="WAKE_CONFIG",
    help="Config file. Else $WAKE_CONFIG, ./wake.toml, ~/.config/wake/wake.toml, /etc/wake/wake.toml, "
    "then the embedded default. Overrides: WAKE_<SECTION>__<KEY>, DATABASE_URL, PG*, REDIS_URL, NEO4J_URI.",
)
@click.version_option(__version__, prog_name="wake")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Wake long-lived LLM agents on a schedule, with a witness record of every wake.

    Logs of one-shot commands go to stderr (JSON when stderr is not a terminal; force with
    WAKE_LOG_FORMAT=json|console); command output goes to stdout.
    """
    import os

    logs.configure(os.environ.get("WAKE_LOG_FORMAT", "auto"), os.environ.get("WAKE_LOG_LEVEL", "info").lower(), stream=sys.stderr)
    ctx.obj = _Context(config_path)


@cli.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@pass_ctx
def doctor_cmd(ctx: _Context, as_json: bool) -> None:
    """Check the config, each store's reachability and latency, the schema and the versions.

    Exits 1 if anything required (the config, PostgreSQL, Redis, Neo4j when configured) fails.
    """
    config = ctx.config
    checks = _run(lambda: doctor.run(config))
    if as_json:
        click.echo(json.dumps({"healthy": doctor.healthy(checks), "checks": doctor.as_json(checks)}, indent=2))
    else:
        click.echo(doctor.as_table(checks))
    sys.exit(0 if doctor.healthy(checks) else 1)


@cli.command("migrate")
@click.option("--status", "show_status", is_flag=True, help="List the migrations and whether each is applied.")
@click.option("--json", "as_json", is_flag=True, help="With --status: print JSON.")
@pass_ctx
def migrate_cmd(ctx: _Context, show_status: bool, as_json: bool) -> None:
    """Apply pending database migrations (safe to run concurrently)."""
    config = ctx.config

    async def body() -> Any:
        async with stores.connected(config, neo4j=False) as st:
            async with st.pg_conn() as conn:
                if show_status:
                    return await schema.status(conn)
                return await schema.migrate(conn)

    result = _run(body)
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
        return
    if result:
        for m in result:
            click.echo(f"applied {m.version:04d}_{m.name}")
    else:
        click.echo(f"schema is current (version {schema.head()})")


def main() -> None:
    cli(prog_name="wake")
