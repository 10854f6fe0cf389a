"""`wake actions`: the reader of `last_actions`, the confirmed mutating actions of an agent across
surfaces (one row per successful call of a tool declared `mutates`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

import ledgers.actions
from wake import clock
from wake.cli import render
from wake.cli.app import Context, agent_option, default_agent, ledger_conn, pass_ctx, run_async
from wake.config import parse_duration_s


def _since(ctx: click.Context, param: click.Parameter, value: str) -> dt.datetime:
    """A duration back from now (`48h`, `7d`) or an ISO 8601 time with its offset."""
    try:
        return clock.now() - dt.timedelta(seconds=parse_duration_s(value))
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f'expected a duration such as "48h" or an ISO 8601 time with an offset, got {value[:80]!r}'
                                 + (f" ({len(value)} characters)" if len(value) > 80 else "")) from exc
    if parsed.tzinfo is None:
        raise click.BadParameter(f"expected a time with a UTC offset (e.g. 2026-11-26T10:00+01:00), got {value!r}")
    return parsed


@click.command("actions")
@agent_option()
@click.option("--since", "since", default="7d", show_default=True, callback=_since,
              help='How far back: a duration ("48h", "7d") or an ISO 8601 time with an offset.')
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {total, since, rows}.")
@pass_ctx
def actions_cmd(ctx: Context, agent_id: str | None, since: dt.datetime, limit: int, as_json: bool) -> None:
    """The agent's confirmed mutating actions (`last_actions`), newest first, with their total:
    each successful call of a tool declared `mutates`, its surface, arguments, wake and fence."""
    config = ctx.config
    agent = default_agent(config, agent_id)

    async def body() -> Any:
        async with ledger_conn(config) as conn:
            return await ledgers.actions.since(conn, agent, since, limit=limit)

    rows, total = run_async(body)
    if as_json:
        click.echo(render.to_json({"agent": agent, "since": since, "total": total, "rows": rows}))
    else:
        click.echo("\n".join(render.actions(rows, total, since)))
