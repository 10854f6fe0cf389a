"""Commands over the epistemic ledgers: `wake demo seed`, `wake facts`, `wake tell` (docs/facts.md).

Registered on the group by `wake.cli.main`.
"""

from __future__ import annotations

from typing import Any

import click

from ledgers import contact, facts
from wake import clock
from wake.cli import app, render


@click.group("demo")
def demo_group() -> None:
    """Demo data for a first look."""


@demo_group.command("seed")
@click.option("--agent", "agent_id", default="demo", show_default=True, help="Agent id ([agents.<id>] in the config).")
@click.pass_obj
def demo_seed_cmd(obj: app.Context, agent_id: str) -> None:
    """Fill the agent's ledgers with demo data (facts of both origins, one unattested and one
    superseded; six open commitments; actions; living summaries; daybook). Running it again adds
    nothing."""
    config = obj.config
    agent = app.default_agent(config, agent_id)
    probe_root = config.probe_roots()[0]  # the demo probe target is relative to the first root

    async def body() -> dict[str, int]:
        async with app.ledger_conn(config) as conn:
                from wake.cli import demo  # the demo seed is loaded by `wake demo` alone

                return await demo.seed(conn, agent, config.agents[agent].timezone, clock.now(), probe_root)

    added = app.run_async(body)
    if added:
        click.echo(f"seeded agent {agent}: " + ", ".join(f"{k} {v}" for k, v in added.items()))
    else:
        click.echo(f"agent {agent} already has its demo data; nothing added")


@click.command("facts")
@click.option("--agent", "agent_id", help="Agent id ([agents.<id>] in the config).")
@click.option("--all", "include_all", is_flag=True, help="Also unverified, overridden, expired and refuted facts.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def facts_cmd(obj: app.Context, agent_id: str | None, include_all: bool, limit: int, as_json: bool) -> None:
    """The agent's facts with their whole passports, newest first (active and superseded; --all for every status)."""
    config = obj.config
    agent = app.default_agent(config, agent_id)

    async def body() -> tuple[list[dict[str, Any]], int]:
        async with app.ledger_conn(config) as conn:
            return await facts.listing(conn, agent, include_all=include_all, limit=limit)

    rows, total = app.run_async(body)
    if as_json:
        click.echo(render.to_json({"total": total, "facts": rows}))
        return
    for r in rows:
        refs = ", ".join(
            f"{label} {str(r[k])[:8]}" for label, k in (("attested by", "attested_ref"), ("cites", "source_ref"),
                                                       ("supersedes", "supersedes_id"), ("wake", "wake_id")) if r[k]
        )
        when = f"recorded {r['recorded_at']:%Y-%m-%d %H:%M}" + (f", superseded {r['superseded_at']:%Y-%m-%d %H:%M}" if r["superseded_at"] else "")
        anchors = "".join(f" [{a['type']}: {a['ref']}]" for a in r["anchors"])
        click.echo(f"{str(r['fact_id'])[:8]}  {r['status']:<10} ({r['origin']}, {when}) {r['category']}/{r['fact_key']}: {r['fact_value']}{anchors}"
                   + (f"  <{refs}>" if refs else "") + f"  [{r['agent_id']}]")
    click.echo(f"{len(rows)} of {total} facts")


@click.command("tell")
@click.argument("message")
@click.option("--agent", "agent_id", help="Agent id ([agents.<id>] in the config).")
@click.option("--author", default="operator", show_default=True, help="Who is speaking.")
@click.option("--channel", default="cli", show_default=True, help="Where it came in.")
@click.pass_obj
def tell_cmd(obj: app.Context, message: str, agent_id: str | None, author: str, channel: str) -> None:
    """Record a message from a human to the agent, verbatim (human_contact). Prints its id: a
    `saw` fact cites it as source_ref and is attested against its text."""
    config = obj.config
    agent = app.default_agent(config, agent_id)
    if not message.strip():
        raise click.UsageError("the message is empty")

    async def body() -> Any:
        async with app.ledger_conn(config) as conn:
                return await contact.record(conn, agent_id=agent, author=author, channel=channel, body=message, received_at=clock.now())

    click.echo(str(app.run_async(body)))


def register(group: click.Group) -> None:
    group.add_command(demo_group)
    group.add_command(facts_cmd)
    group.add_command(tell_cmd)
