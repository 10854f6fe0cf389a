"""Operator controls over the schedule and the deliveries: `wake pause`, `wake resume`, `wake at`,
`wake outbox` (docs/daemon.md). Everything is stored in PostgreSQL, so every replica honours it at
once. Listed in `wake.cli.commands`.

Bad input (an unknown agent or tier, a time that does not parse or has passed, an id that matches
nothing) is one line, `wake: …`, and exit 65 (an unknown id: 1).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import click

from ledgers import controls, memory_ledger, outbox, rows
from wake import clock
from wake.cli import app, render
from wake.config import Config
from wake.daemon import channels
from wake.daemon.commands import TIME_HELP, operator, parse_when
from wake.errors import InvalidInput, NotFound, WakeError

TIER_CHOICE = app.TIER_CHOICE
# `wake at` takes a time typed within this much of now as now (the minute being typed); anything
# earlier has passed and is refused, as `wake pause --until` refuses it.
AT_PAST_GRACE = dt.timedelta(seconds=60)


def _agent(config: Config, agent_id: str | None, tier: str | None = None) -> str:
    if agent_id is None:
        if len(config.agents) != 1:
            raise InvalidInput(f"several agents are configured; name one with --agent ({', '.join(config.agents)})")
        agent_id = next(iter(config.agents))
    if agent_id not in config.agents:
        raise InvalidInput(f"no agent {agent_id!r} is configured; known: {', '.join(sorted(config.agents))}")
    if tier is not None and tier not in config.agents[agent_id].tiers:
        raise InvalidInput(f"agent {agent_id!r} has no {tier} tier; configured: {', '.join(config.agents[agent_id].tiers)}")
    return agent_id


def _checked(fn: Any) -> Any:
    """Run a command body that may refuse its input before any store is reached."""
    try:
        return fn()
    except WakeError as exc:
        app.fail(exc)


@click.command("pause")
@click.argument("agent_id", type=app.AGENT_ID)
@click.option("--tier", type=TIER_CHOICE, help="Only this tier (default: every tier of the agent).")
@click.option("--until", "until_text", help=f"Resume by itself then: {TIME_HELP}.")
@click.option("--reason", help="Why; shown on every skipped row and in `wake status`.")
@click.option("--by", "paused_by", type=app.WHO, default=operator, show_default="your user name", help="Who paused it.")
@app.pass_ctx
def pause_cmd(ctx: app.Context, agent_id: str, tier: str | None, until_text: str | None, reason: str | None, paused_by: str) -> None:
    """Pause an agent (or one of its tiers): its slots and one-shots are recorded `skipped` (reason
    `paused`) on every replica until `wake resume` or --until."""
    config = ctx.config
    now = clock.now()

    def check() -> dt.datetime | None:
        _agent(config, agent_id, tier)
        until = parse_when(until_text, now, config.agents[agent_id].timezone) if until_text else None
        if until is not None and until <= now:
            raise InvalidInput(f"--until {until_text!r} is {until.isoformat()}, which has passed")
        return until

    until = _checked(check)

    async def body() -> None:
        async with app.ledger_conn(config) as conn:
            await controls.pause(conn, agent_id=agent_id, tier=tier, paused_by=paused_by, paused_at=now, until=until, reason=reason)

    app.run_async(body)
    click.echo(f"paused {agent_id}/{tier or 'all tiers'} by {paused_by}" + (f" until {until.isoformat()}" if until else " until `wake resume`"))


@click.command("resume")
@click.argument("agent_id", type=app.AGENT_ID)
@click.option("--tier", type=TIER_CHOICE, help="Lift only this tier's pause (default: every pause of the agent).")
@app.pass_ctx
def resume_cmd(ctx: app.Context, agent_id: str, tier: str | None) -> None:
    """Lift an agent's pauses; its next slots run as scheduled."""
    config = ctx.config
    _checked(lambda: _agent(config, agent_id, tier))

    async def body() -> list[controls.Pause]:
        async with app.ledger_conn(config) as conn:
            return await controls.resume(conn, agent_id, tier)

    lifted = app.run_async(body)
    if not lifted:
        click.echo(f"{agent_id}/{tier or 'all tiers'} was not paused; nothing changed")
        return
    for p in lifted:
        click.echo(f"resumed {p.agent_id}/{p.tier} (paused by {p.paused_by})")


@click.command("at")
@click.argument("when", required=False)
@app.agent_option()
@click.option("--tier", type=TIER_CHOICE, default="whisper", show_default=True, help="Depth of the wake.")
@click.option("--note", help="Why; shown by `wake at --list`.")
@click.option("--list", "listing", is_flag=True, help="List the pending one-shots (with --all, the ones that ran or were cancelled too).")
@click.option("--all", "include_done", is_flag=True, help="With --list: also the claimed and cancelled ones, with their wake's status.")
@click.option("--cancel", "cancel_id", help="Cancel a pending one-shot (its id or a unique prefix).")
@click.option("--json", "as_json", is_flag=True, help="With --list: print JSON.")
@app.pass_ctx
def at_cmd(
    ctx: app.Context, when: str | None, agent_id: str | None, tier: str, note: str | None, listing: bool, include_done: bool,
    cancel_id: str | None, as_json: bool,
) -> None:
    """Ask for one wake at WHEN (an ISO time, HH:MM or a duration from now). The daemon runs it once,
    across every replica and restart; if it was down at WHEN, it runs it when it is back."""
    config = ctx.config
    if sum((when is not None, listing, cancel_id is not None)) != 1:
        app.fail(InvalidInput("give exactly one of: a time WHEN, --list, --cancel ID"))
    if listing:
        rows = app.run_async(lambda: _list(config, include_done))
        click.echo(render.to_json(rows) if as_json else "\n".join(render.oneshots(rows)))
        return
    if cancel_id is not None:
        shot = app.run_async(lambda: _cancel(config, cancel_id))
        click.echo(f"cancelled one-shot {shot.wake_id} ({shot.agent_id}/{shot.tier} at {shot.fire_at.isoformat()})")
        return
    assert when is not None
    now = clock.now()
    agent = _checked(lambda: _agent(config, agent_id, tier))
    fire_at = _checked(lambda: parse_when(when, now, config.agents[agent].timezone))
    if fire_at < now - AT_PAST_GRACE:
        app.fail(InvalidInput(f"{app.clip(when)} is {fire_at.isoformat()}, which has passed; give a time to come"))
    shot_id = app.run_async(lambda: _add(config, agent, tier, fire_at, note, now))
    click.echo(f"one-shot {shot_id} for {agent}/{tier} at {fire_at.isoformat()}" + (" (now: it is due)" if fire_at <= now else ""))


async def _list(config: Config, include_done: bool) -> list[controls.OneShot]:
    async with app.ledger_conn(config) as conn:
        return await controls.oneshots(conn, include_done=include_done)


async def _cancel(config: Config, text: str) -> controls.OneShot:
    async with app.ledger_conn(config) as conn:
        wake_id = await controls.resolve_oneshot(conn, text)
        shot = await controls.oneshot(conn, wake_id) if wake_id else None
        if shot is None:
            raise NotFound(f"no one-shot matches {text!r} (give a full id or a unique prefix; `wake at --list`)")
        if not await controls.cancel_oneshot(conn, shot.wake_id, operator(), clock.now()):
            done = "was already cancelled" if shot.cancelled_at else f"already ran (claimed by {shot.claimed_by})"
            raise InvalidInput(f"one-shot {shot.wake_id} {done}")
        return shot


async def _add(config: Config, agent: str, tier: str, fire_at: dt.datetime, note: str | None, now: dt.datetime) -> str:
    wake_id = uuid.uuid4()
    async with app.ledger_conn(config) as conn:
        await controls.add_oneshot(
            conn, wake_id=wake_id, agent_id=agent, tier=tier, fire_at=fire_at, note=note, created_by=operator(), created_at=now,
        )
    return str(wake_id)


@click.command("outbox")
@click.option("--failed", "dead_only", is_flag=True, help="Only deliveries that gave up (dead).")
@click.option("--retry", "retry_id", type=app.ROW_ID, help="Send this delivery again (its attempts start over).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app.pass_ctx
def outbox_cmd(ctx: app.Context, dead_only: bool, retry_id: int | None, limit: int, as_json: bool) -> None:
    """Deliveries not delivered yet: pending (with their attempts and next try) and dead (with the last error)."""
    config = ctx.config
    if retry_id is not None:
        app.run_async(lambda: _retry(config, retry_id))
        click.echo(f"delivery {retry_id} is queued again; the daemon sends it on its next pass")
        return

    async def body() -> list[outbox.Delivery]:
        async with app.ledger_conn(config) as conn:
            return await outbox.listing(conn, dead_only=dead_only, limit=limit)

    found = app.run_async(body)
    targets = {r.id: channels.route_target(config, r.route) for r in found}  # redacted: never a secret
    if as_json:
        click.echo(render.to_json([{**dict(rows.fields(r)), "target": targets[r.id]} for r in found]))
    else:
        click.echo("\n".join(render.outbox(found, targets)))


async def _retry(config: Config, row_id: int) -> None:
    async with app.ledger_conn(config) as conn:
        row = await outbox.get(conn, row_id)
        if row is None:
            raise NotFound(f"no delivery {row_id} (`wake outbox` lists them)")
        if not await outbox.retry(conn, row_id, clock.now()):
            assert row.sent_at is not None  # retry refuses only a sent row, and a sent row has its time (a CHECK)
            raise InvalidInput(f"delivery {row_id} was already sent at {row.sent_at.isoformat()}; nothing to retry")


async def snapshot(config: Config, now: dt.datetime) -> dict[str, object]:
    """What `wake status` shows of the operator controls: pauses in force, pending one-shots, and
    each agent's open Cloister findings counted by level (HALT, WARN, LOG)."""
    try:
        async with app.ledger_conn(config) as conn:
            return {"pauses": await controls.active_pauses(conn, now), "oneshots": await controls.oneshots(conn),
                    "open_findings": await memory_ledger.open_counts_by_agent(conn, list(config.agents))}
    except WakeError as exc:
        return {"controls_error": str(exc)}
