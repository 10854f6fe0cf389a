"""Commands over the epistemic ledgers: `wake demo seed` (and `wake demo wake`), `wake facts` (`--check`: docs/verify.md),
`wake tell`, `wake settle` (docs/facts.md).

Listed in `wake.cli.commands`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import zoneinfo
from typing import Any

import click

from codecheck import verify
from ledgers import contact, fact_checks, facts, settled
from ledgers.vocab import GOOD, Tier
from wake import clock
from wake.arrival import code_check
from wake.cli import app, render, workspace
from wake.config import Config


@click.group("demo")
def demo_group() -> None:
    """Demo data and a demo wake for a first look."""


@demo_group.command("seed")
@click.option("--agent", "agent_id", type=app.AGENT_ID, default="demo", show_default=True, help="Agent id ([agents.<id>] in the config).")
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


@demo_group.command("wake")
@click.option("--agent", "agent_id", type=app.AGENT_ID, default="demo", show_default=True, help="Agent id ([agents.<id>] in the config).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_obj
def demo_wake_cmd(obj: app.Context, agent_id: str, as_json: bool) -> None:
    """Run one surface wake of the agent on the embedded model (`wake model fetch` first), binding
    the whisper tools: its first turn calls `local_time`, the second answers; then read it with
    `wake show ID --transcript`. Exit 69 when the model is not fetched, 1 when the wake fails."""
    from wake.cli import demo
    from wake.cli.up import WORKSPACE_WARM_S
    from wake.context import WakeRequest
    from wake.run import claim, session

    config = obj.config
    agent = app.agent_with_tier(config, agent_id, demo.DEMO_TIER)
    conf, route = demo.demo_config(config, agent)
    request = WakeRequest(agent_id=agent, tier=Tier(demo.DEMO_TIER))

    async def body() -> Any:
        session.require_embedded(conf, [(agent, demo.DEMO_TIER)])
        async with session.open_session(conf) as s:
            await code_check.warmed(conf, agent, WORKSPACE_WARM_S)
            return await claim.run(s, request, owner=claim.owner())

    if not as_json:
        click.echo(f"a surface wake of {agent} on the embedded model (route {route}): about a minute on 2 cores", err=True)
    o = app.run_async(body)
    if as_json:
        click.echo(render.to_json({"wake_id": o.wake_id, "agent": o.agent_id, "tier": o.tier, "status": o.status, "note": o.note,
                                   "error": o.error, "route": route, **render.thinking_json(o)}))
    else:
        click.echo(render.outcome(o))
        click.echo(f"\nthe conversation, each tool call and its answer: wake show {o.wake_id} --transcript")
    sys.exit(0 if o.status in GOOD else 1)


async def check_facts(config: Config, agent: str, limit: int, record: bool) -> dict[str, object]:
    """Check every active fact with code anchors (of the newest `limit`) against the workspace at
    HEAD now; record each check in fact_checks (a refuted one with its retraction) unless told not
    to. Says how many active facts were not checked, and why. A workspace that cannot be
    fingerprinted is `WorkspaceUnavailable` (its exit status), before anything is read."""
    ws = workspace.open_workspace(config, agent)
    await asyncio.to_thread(workspace.fingerprinted, ws)
    async with app.ledger_stores(config) as st:
        async with st.pg_conn() as conn:
            rows, _ = await facts.listing(conn, agent, include_all=False, limit=limit)
            active = await facts.active_count(conn, agent)
        read = [r for r in rows if r.status == "active"]
        heads = [r for r in read if code_check.has_code_anchors(r.anchors)]
        checked = await verify.check(ws, [(r.anchors, r.fact_value) for r in heads], budget_ms=workspace.CLI_BUDGET_S * 1000)
        now = clock.now()
        if record and heads:
            async with st.pg_conn() as conn, conn.transaction():
                for r, v in zip(heads, checked.verdicts, strict=True):
                    await fact_checks.record(conn, agent_id=agent, fact_id=r.fact_id, verdict=v, checked_at=now,
                                             maturity_days=config.retractions.falsifier_maturity_days)
    checks = [{"fact_id": r.fact_id, "fact_key": r.fact_key, "fact_value": r.fact_value, **v.as_dict(), "recorded": record}
              for r, v in zip(heads, checked.verdicts, strict=True)]
    return {"agent": agent, "checked": len(checks), "active": active,
            "not_checked": {"beyond_limit": max(0, active - len(read)), "no_code_anchor": len(read) - len(heads)},
            "limit": limit, "recorded": record, "facts": checks}


@click.command("facts")
@click.option("--agent", "agent_id", type=app.AGENT_ID, help="Agent id ([agents.<id>] in the config).")
@click.option("--all", "include_all", is_flag=True, help="Also unverified, overridden, expired and refuted facts.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--check", "check", is_flag=True,
              help="Check each active fact's code anchors against the workspace at HEAD now: status and evidence.")
@click.option("--no-record", is_flag=True, help="With --check: record nothing in fact_checks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def facts_cmd(obj: app.Context, agent_id: str | None, include_all: bool, limit: int, check: bool, no_record: bool, as_json: bool) -> None:
    """The agent's facts with their whole passports, newest first (active and superseded; --all for every status).
    With --check, each active fact with code anchors checked against the workspace at HEAD."""
    config = obj.config
    agent = app.default_agent(config, agent_id)
    if check:
        report = app.run_async(lambda: check_facts(config, agent, limit, not no_record))
        click.echo(render.to_json({k: v for k, v in report.items() if k not in ("limit", "recorded")}) if as_json
                   else render.fact_checks(report))
        return

    async def body() -> tuple[list[facts.Fact], int]:
        async with app.ledger_conn(config) as conn:
            return await facts.listing(conn, agent, include_all=include_all, limit=limit)

    rows, total = app.run_async(body)
    if as_json:
        click.echo(render.to_json({"total": total, "facts": rows}))
        return
    click.echo("\n".join(render.facts_listing(rows, total)))


@click.command("tell")
@click.argument("message")
@click.option("--agent", "agent_id", type=app.AGENT_ID, help="Agent id ([agents.<id>] in the config).")
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


@click.command("settle")
@click.argument("subject")
@click.argument("state")
@click.option("--agent", "agent_id", type=app.AGENT_ID, help="Agent id ([agents.<id>] in the config).")
@click.option(
    "--on", "state_on", type=click.DateTime(formats=["%Y-%m-%d"]), help="The day the state is about (YYYY-MM-DD); default today in the agent's zone.",
)
@click.pass_obj
def settle_cmd(obj: app.Context, subject: str, state: str, agent_id: str | None, state_on: dt.datetime | None) -> None:
    """Record the agent's latest settled state (the `settled_state` table): the first line of its
    settled-facts block from the next wake on. Prints the state id."""
    config = obj.config
    agent = app.default_agent(config, agent_id)
    if not subject.strip() or not state.strip():
        raise click.UsageError("the subject and the state must be non-empty")
    now = clock.now()
    day = state_on.date() if state_on else now.astimezone(zoneinfo.ZoneInfo(config.agents[agent].timezone)).date()

    async def body() -> int:
        async with app.ledger_conn(config) as conn:
            return await settled.record_state(conn, agent_id=agent, subject=subject.strip(), state=state.strip(), state_on=day, settled_at=now)

    click.echo(f"settled state {app.run_async(body)} for agent {agent}: {day.isoformat()} {subject.strip()}")
