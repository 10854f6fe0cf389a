"""`wake incidents [--all] [--json]` and `wake incidents ack ID --by NAME` (docs/incidents.md).

Bad input (an id that is not a number, an empty or over-long --by) is one line and exit 65; an id
that matches nothing, exit 1. Listed in `wake.cli.commands`.
"""

from __future__ import annotations

import click

from ledgers import incidents
from wake import clock
from wake.cli import render
from wake.cli.app import Context, fail, ledger_conn, pass_ctx, run_async
from wake.errors import InvalidInput
from wake.run import incident_policy


def _shown(text: str, limit: int = 160) -> str:
    """Stored text on an operator's terminal: control characters replaced, clipped."""
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def lines(i: incidents.Incident) -> list[str]:
    state = f"closed {i.closed_at.isoformat()}" if i.closed_at else "open"
    acked = f", acked by {_shown(i.acked_by, 40)}" if i.acked_by else ""
    return [
        f"incident {i.id}  {i.agent_id}/{i.tier}  {state}{acked}  rows={i.rows_seen}  opened {i.opened_at.isoformat()}"
        f"  last {i.last_seen_at.isoformat()}",
        f"  {_shown(i.signature)}",
    ]


@click.group("incidents", invoke_without_command=True)
@click.option("--all", "include_closed", is_flag=True, help="Closed incidents too (default: the open ones).")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def incidents_group(click_ctx: click.Context, include_closed: bool, limit: int, as_json: bool) -> None:
    """Open incidents: a tier's failing rows of one error signature, counted, each with its first and last wake; `--all` adds closed ones."""
    if click_ctx.invoked_subcommand is not None:
        return
    ctx = click_ctx.find_object(Context)
    assert ctx is not None
    config = ctx.config

    async def body() -> list[incidents.Incident]:
        async with ledger_conn(config) as conn:
            return await incidents.listing(conn, include_closed=include_closed, limit=limit)

    found = run_async(body)
    if as_json:
        click.echo(render.to_json(found))
        return
    if not found:
        click.echo("no open incidents" if not include_closed else "no incidents")
        return
    for i in found:
        click.echo("\n".join(lines(i)))


@incidents_group.command("ack")
@click.argument("incident_id", metavar="ID")
@click.option("--by", "by", required=True, help="Who acknowledges it (recorded).")
@pass_ctx
def ack_cmd(ctx: Context, incident_id: str, by: str) -> None:
    """Acknowledge an incident: recorded with who and when; it stays open until a success of its tier closes it."""
    try:
        number = incident_policy.incident_number(incident_id)
        who = incident_policy.acker(by)
    except InvalidInput as exc:
        fail(exc)
    config = ctx.config

    async def body() -> None:
        async with ledger_conn(config) as conn:
            await incident_policy.acknowledge(conn, number, who, clock.now())  # the console's ack button calls it too

    run_async(body)
    click.echo(f"incident {number} acknowledged by {_shown(who, 40)}")
