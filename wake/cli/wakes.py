"""The commands that read the wake ledger: `wake ledger` (recent wakes), `wake show` (one wake) and
`wake diff` (two wakes' tools and blocks)."""

from __future__ import annotations

import uuid
from typing import Any

import click

from ledgers import introspection, transcripts
from ledgers.vocab import Status, Trigger
from wake.cli import render, replay
from wake.cli.app import TIER_CHOICE, Context, agent_option, clip, default_agent, ledger_conn, pass_ctx, resolve_wake, run_async
from wake.errors import NotFound
from wake.witness import diff


@click.command("ledger")
@agent_option()
@click.option("--tier", type=TIER_CHOICE, help="Only this tier.")
@click.option("--status", type=click.Choice([s.value for s in Status]), help="Only this status.")
@click.option("--trigger", type=click.Choice([t.value for t in Trigger]), help="Only wakes of this trigger.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def ledger_cmd(ctx: Context, agent_id: str | None, tier: str | None, status: str | None, trigger: str | None, limit: int, as_json: bool) -> None:
    """A table of recent wakes: time, agent, tier, trigger, status, tools, duration, root prefix."""
    config = ctx.config

    async def body() -> Any:
        async with ledger_conn(config) as conn:
            return await introspection.recent(conn, agent_id=agent_id, tier=tier, status=status, trigger=trigger, limit=limit)

    rows = run_async(body)
    click.echo(render.to_json([r.columns() for r in rows]) if as_json else render.ledger(rows))


async def resolve_shown(conn: Any, text: str) -> tuple[str, uuid.UUID]:
    """What `wake show` names: a wake or a stored replay, by a full id or a unique prefix. Both are
    uuid4s, so a full id is one or the other; a prefix that names a wake and a replay is refused
    as any shared prefix is."""
    from ledgers import replays
    from ledgers.errors import IdLookupError

    wake = await introspection.resolve_id(conn, text)
    replay = await replays.resolve_id(conn, text)
    if wake is not None and replay is not None:
        raise IdLookupError(f"{clip(text)} matches wake {wake} and replay {replay} (give more of the id)")
    if replay is not None:
        return "replay", replay
    if wake is None:
        raise NotFound(f"no wake matches {text!r} (give a full id or a unique prefix)")
    return "wake", wake


@click.command("show")
@click.argument("wake_id")
@click.option("--json", "as_json", is_flag=True, help="Print the row as JSON.")
@click.option("--arrival", is_flag=True, help="Print the arrival the wake saw (or the replay sent), block by block, from the stored texts.")
@click.option("--transcript", "show_transcript", is_flag=True, help="Print the conversation as the model saw it: every message, call and answer.")
@pass_ctx
def show_cmd(ctx: Context, wake_id: str, as_json: bool, arrival: bool, show_transcript: bool) -> None:
    """Show everything recorded about one wake or one stored replay (an id or a unique prefix)."""
    config = ctx.config
    if arrival and show_transcript:
        raise click.UsageError("give --arrival or --transcript, not both")

    async def body() -> Any:
        async with ledger_conn(config) as conn:
            kind, found = await resolve_shown(conn, wake_id)
            if kind == "replay":
                return await replay.read_shown(conn, found, transcript=show_transcript, arrival=arrival)
            if show_transcript:
                row = await introspection.get(conn, found)
                assert row is not None
                return transcripts.as_dict(await transcripts.read(conn, found), row.columns())
            return await introspection.arrival(conn, found) if arrival else await introspection.get(conn, found)

    got = run_async(body)
    if isinstance(got, replay.Shown):
        replay.print_shown(got, as_json)
        return
    if show_transcript:
        click.echo(render.to_json(got) if as_json else render.transcript(got))
        return
    if arrival:
        click.echo(render.to_json([{"name": n, "text": t} for n, t in got]) if as_json else render.arrival(got))
        return
    click.echo(render.to_json(got.columns()) if as_json else render.row(got))


@click.command("diff")
@click.argument("older", required=False)
@click.argument("newer", required=False)
@agent_option()
@click.option("--tier", type=TIER_CHOICE, help="Compare within this tier (default: the tier of the agent's newest wake).")
@click.option("--across-tiers", is_flag=True, help="Compare the agent's last two wakes whatever their tiers.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def diff_cmd(ctx: Context, older: str | None, newer: str | None, agent_id: str | None, tier: str | None, across_tiers: bool, as_json: bool) -> None:
    """Diff two wakes' tools and blocks. Default: the agent's last two of one tier (the newest
    wake's, or --tier); one id: it against the newest of that tier."""
    config = ctx.config

    async def body() -> Any:
        async with ledger_conn(config) as conn:
            agent = default_agent(config, agent_id)
            latest = await introspection.last_two(conn, agent, tier, across_tiers=across_tiers)
            b: uuid.UUID | None
            if older and newer:
                a, b = await resolve_wake(conn, older), await resolve_wake(conn, newer)
            elif older:
                a = await resolve_wake(conn, older)
                own = await introspection.get(conn, a)
                if own is not None and tier is None and not across_tiers:  # against the newest wake of its own tier
                    latest = await introspection.last_two(conn, agent, own.tier)
                b = latest[0] if latest else None
            elif len(latest) == 2:
                b, a = latest
            else:
                scope = "" if across_tiers else f" of tier {tier}" if tier else " of its newest wake's tier"
                raise NotFound(f"agent {agent!r} has fewer than two recorded wakes{scope} (--tier T or --across-tiers to compare others)")
            if b is None:
                raise NotFound(f"agent {agent!r} has no recorded wake")
            return await introspection.get(conn, a), await introspection.get(conn, b)

    old, new = run_async(body)
    result = diff.compare(old, new.tool_hashes, new.blocks)
    if as_json:
        click.echo(render.to_json({**result.as_json(), "of": str(new.wake_id)}))
    else:
        click.echo(f"{old.wake_id} ({old.tier}) -> {new.wake_id} ({new.tier})")
        click.echo(render.diff_line("agent", result).replace("previous agent wake", "older"))
