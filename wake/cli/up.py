"""The commands that open a session (the stores and the tool registry): `wake up` runs one wake
now, `wake verify` recomputes a recorded one (and, with --live, runs its sources again), and
`wake registry` prints the capability map."""

from __future__ import annotations

import sys
from typing import Any

import click

from ledgers import introspection, transcripts
from ledgers.vocab import GOOD, Tier
from surfaces import capability
from wake.arrival import code_check
from wake.cli import render, tools
from wake.cli.app import TIER_CHOICE, Context, agent_option, agent_with_tier, fail, ledger_conn, pass_ctx, resolve_wake, run_async
from wake.context import WakeRequest
from wake.errors import WakeError
from wake.run import claim, cycle, session
from wake.think import prompt
from wake.witness import manifest

WORKSPACE_WARM_S = 30.0  # `wake up` waits this long for the agent's workspace fingerprint before the wake


@click.command("up")
@agent_option()
@click.option("--tier", type=TIER_CHOICE, default=Tier.whisper.value, show_default=True, help="Depth of the wake.")
@click.option("--dry-run", is_flag=True, help="Print the prompt as sent (every message), the manifest and the diff; record nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@pass_ctx
def up_cmd(ctx: Context, agent_id: str | None, tier: str, dry_run: bool, as_json: bool) -> None:
    """Run one wake now, in this process (trigger `manual`), and print what it saw and held."""
    config = ctx.config
    agent = agent_with_tier(config, agent_id, tier)

    request = WakeRequest(agent_id=agent, tier=Tier(tier))

    async def body() -> Any:
        async with session.open_session(config) as s:
            await code_check.warmed(config, agent, WORKSPACE_WARM_S)  # as the daemon builds it at start
            if dry_run:  # records nothing, so it needs no lease
                return await cycle.run_wake(s, request, dry_run=True)
            return await claim.run(s, request, owner=claim.owner())

    o = run_async(body)
    if as_json:
        click.echo(render.to_json({
            "wake_id": o.wake_id, "agent": o.agent_id, "tier": o.tier, "status": o.status, "note": o.note, "error": o.error,
            "manifest": o.manifest.as_dict() if o.manifest else None, "tools": [t.name for t in o.binding],
            "blocks": [{"name": b.name, **b.state(o.manifest.blocks[b.name] if o.manifest else "")} for b in o.blocks],
            "diff": o.diff.as_json() if o.diff else None, "recorded": o.recorded,
            **({"prompt": o.prompt, "messages": prompt.messages(o.blocks)} if dry_run else {}), **render.thinking_json(o),
        }))
    elif dry_run:
        click.echo("=== arrival prompt ===")
        click.echo(render.messages(prompt.messages(o.blocks)))
        click.echo("\n=== manifest ===")
        click.echo(render.to_json(o.manifest.as_dict() if o.manifest else None))
        click.echo("\n=== diff ===")
        click.echo(render.to_json(o.diff.as_json() if o.diff else None))
        click.echo(f"\n{o.note}")
    else:
        click.echo(render.outcome(o))
    sys.exit(0 if o.status in GOOD else 1)


@click.command("verify")
@click.argument("wake_id", required=False)
@click.option("--live", is_flag=True, help="Also re-run the sources and the binding now and name what differs.")
@click.option("--chain", "check_chain", is_flag=True, help="Walk the agent's hash chain (every agent's without --agent); name the first broken row.")
@agent_option()
@pass_ctx
def verify_cmd(ctx: Context, wake_id: str | None, live: bool, check_chain: bool, agent_id: str | None) -> None:
    """Recompute a wake's block and tool hashes from their stored content, then its root, and name
    every part that differs; or, with --chain, walk the hash chain. Exit 1 if anything differs."""
    config = ctx.config
    if check_chain:
        if wake_id or live:
            raise click.UsageError("--chain walks every row of an agent: give no wake id and no --live")
        checks = run_async(lambda: _walk_chains(config, agent_id))
        click.echo("\n".join(render.chain_lines(checks)))
        sys.exit(0 if all(c.why is None for c in checks) else 1)
    if wake_id is None:
        raise click.UsageError("give a wake id (or --chain)")

    async def body() -> Any:
        async with session.open_session(config) as s:
            async with s.stores.pg_conn() as conn:
                row = await introspection.get(conn, await resolve_wake(conn, wake_id))
                assert row is not None
                stored = await introspection.contents(conn, manifest.stored_hashes(row.columns()))
                said = await transcripts.read(conn, row.wake_id)
            now = None
            if live:
                now = await cycle.run_wake(s, WakeRequest(agent_id=row.agent_id, tier=row.tier), dry_run=True)
            return row, stored, said, now

    row, stored, said, now = run_async(body)
    if row.manifest_root is None:
        click.echo(f"wake {row.wake_id} has no manifest (status {row.status})")
        sys.exit(1)
    checked = manifest.verify_row(row.columns(), stored)
    recomputed, differences, legacy = checked.recomputed, checked.differences, checked.legacy
    differences += [manifest.Difference(part, detail) for part, detail in transcripts.audit(said, row.columns())]
    click.echo("\n".join(render.verify_lines(row, recomputed, differences)))
    click.echo(render.transcript_line(said, row.columns()))
    if legacy:
        click.echo("(recorded before block texts and tools were stored: only the root is recomputed, from the row's hashes)")
    if now is not None:
        click.echo("\n".join(render.live_lines(row, now)))
    sys.exit(0 if not differences else 1)


async def _walk_chains(config: Any, agent_id: str | None) -> list[introspection.ChainCheck]:
    async with ledger_conn(config) as conn:
        agents = [agent_id] if agent_id else await introspection.chain_agents(conn)
        return [
            introspection.walk(a, await introspection.chain_rows(conn, a), await introspection.chain_head(conn, a)) for a in agents
        ]


@click.command("registry")
@click.option("--json", "as_json", is_flag=True, help="Print the capability map as JSON.")
@pass_ctx
def registry_cmd(ctx: Context, as_json: bool) -> None:
    """The capability map: every tool, its surfaces, which tiers bind it, counts, inert declarations.
    MCP servers are started to list their tools (and closed); each MCP tool shows its server, pin
    policy and pin state (pinned, changed, unpinned; unknown without PostgreSQL)."""
    config = ctx.config
    if config.tools.mcp:
        report = run_async(lambda: tools.registry_report(config))
        click.echo(render.to_json(report) if as_json else tools.render_report(report))
        return
    try:
        registry = session.build_registry(config)
    except WakeError as exc:
        fail(exc)
    tier_binds = {f"{a}.{t}": list(conf.binds) for a, agent in config.agents.items() for t, conf in agent.tiers.items()}
    cmap = capability.build(registry, tier_binds)
    click.echo(render.to_json(cmap.as_dict()) if as_json else render.capability_map(cmap))
