"""The commands that open a session (the stores and the tool registry): `wake up` runs one wake
now, `wake verify` recomputes a recorded one (and, with --live, runs its sources again), and
`wake registry` prints the capability map."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from ledgers import approvals, contact, introspection, tool_pins, transcripts
from ledgers.vocab import GOOD, Tier
from surfaces import capability
from untrusted import spotlight
from wake import clock
from wake.arrival import code_check
from wake.cli import render, tools
from wake.cli.app import TIER_CHOICE, Context, agent_option, agent_with_tier, clip, fail, ledger_conn, pass_ctx, resolve_wake, run_async
from wake.context import WakeRequest
from wake.errors import ConfigError, WakeError
from wake.run import claim, cycle, mcp_tools, session
from wake.think import prompt
from wake.witness import manifest

if TYPE_CHECKING:
    from wake.witness import anchor

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

    async def body() -> tuple[Any, list[tool_pins.Finding]]:
        if not dry_run:  # a dry run calls no model
            session.require_embedded(config, [(agent, tier)])
        async with session.open_session(config) as s:
            await code_check.warmed(config, agent, WORKSPACE_WARM_S)  # as the daemon builds it at start
            # a dry run records nothing, so it needs no lease
            o: object = await cycle.run_wake(s, request, dry_run=True) if dry_run else await claim.run(s, request, owner=claim.owner())
            return o, await withheld(s, o)

    o, held = run_async(body)
    if as_json:
        click.echo(render.to_json({
            "wake_id": o.wake_id, "agent": o.agent_id, "tier": o.tier, "status": o.status, "note": o.note, "error": o.error,
            "manifest": o.manifest.as_dict() if o.manifest else None, "tools": [t.name for t in o.binding],
            "blocks": [{"name": b.name, **b.state(o.manifest.blocks[b.name] if o.manifest else "")} for b in o.blocks],
            "diff": o.diff.as_json() if o.diff else None, "recorded": o.recorded,
            "withheld": [{"tool": f.name, "finding": f.id, "accept": accept_command(f)} for f in held],
            **({"prompt": o.prompt, "messages": prompt.messages(o.blocks, spotlight.for_agent(o.agent_id))} if dry_run else {}),
            **render.thinking_json(o),
        }))
    elif dry_run:
        click.echo("=== arrival prompt ===")
        click.echo(render.messages(prompt.messages(o.blocks, spotlight.for_agent(o.agent_id))))
        click.echo("\n=== manifest ===")
        click.echo(render.to_json(o.manifest.as_dict() if o.manifest else None))
        click.echo("\n=== diff ===")
        click.echo(render.to_json(o.diff.as_json() if o.diff else None))
        click.echo(f"\n{o.note}")
    else:
        click.echo(render.outcome(o))
        click.echo("\n".join(withheld_lines(held)))
    sys.exit(0 if o.status in GOOD else 1)


async def withheld(s: session.Session, o: Any) -> list[tool_pins.Finding]:
    """The MCP tools of the registry this wake did not hold because their declaration changed
    since its pin (an open finding under the `strict` policy): `wake up` names each with its
    finding and the command that accepts it, where an operator reads (not only in the arrival)."""
    if mcp_tools.hub_of(s.registry) is None:
        return []
    bound = {t.name for t in o.binding}
    try:
        async with s.stores.pg_conn() as conn:
            open_ = await tool_pins.findings(conn, include_closed=False, limit=tools.FINDINGS_LIMIT)
    except WakeError:
        return []
    return [f for f in open_ if f.policy == "strict" and f.name not in bound]


def accept_command(f: tool_pins.Finding) -> str:
    return f"wake tools accept {f.server}/{f.tool} --by YOUR_NAME"


def withheld_lines(held: list[tool_pins.Finding]) -> list[str]:
    if not held:
        return []
    lines = ["", f"withheld ({len(held)}): MCP tools whose declaration changed since it was pinned (docs/tools.md, Pins)"]
    for f in held:
        lines += [f"  {f.name}: finding {f.id}, raised {f.raised_at:%Y-%m-%d %H:%M %Z}; see the diff with `wake tools findings`",
                  f"    to bind it again from the next wake: {accept_command(f)}"]
    return lines


@click.command("verify")
@click.argument("wake_id", required=False)
@click.option("--live", is_flag=True, help="Also re-run the sources and the binding now and name what differs.")
@click.option("--chain", "check_chain", is_flag=True, help="Walk the agent's hash chain (every agent's without --agent); name the first broken row.")
@click.option("--anchor", "take_anchor", is_flag=True,
              help="With --chain: first timestamp each agent's chain head at [anchor] tsa_url (RFC 3161), stored beside it.")
@agent_option()
@pass_ctx
def verify_cmd(ctx: Context, wake_id: str | None, live: bool, check_chain: bool, take_anchor: bool, agent_id: str | None) -> None:
    """Recompute a wake's block and tool hashes from their stored content, then its root, and name
    every part that differs; or, with --chain, walk the hash chain and check every anchored head
    (with --anchor, anchor the heads first). Exit 1 if anything differs."""
    config = ctx.config
    if take_anchor and not check_chain:
        raise click.UsageError("--anchor goes with --chain")
    if check_chain:
        if wake_id or live:
            raise click.UsageError("--chain walks every row of an agent: give no wake id and no --live")
        sys.exit(_verify_chains(config, agent_id, take_anchor))
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


def _verify_chains(config: object, agent_id: str | None, take_anchor: bool) -> int:
    """`wake verify --chain`: print every chain, anchor and unsealed row; 0 when all hold, else 1."""
    checks, anchored, anchor_checks, forged = run_async(lambda: _walk_chains(config, agent_id, take_anchor=take_anchor))
    click.echo("\n".join(render.chain_lines(checks) + render.anchor_lines(anchored, anchor_checks) + forged))
    return 0 if all(c.why is None for c in checks) and all(a.mismatch is None for a in anchor_checks) and not forged else 1


async def _walk_chains(
    config: Any, agent_id: str | None, *, take_anchor: bool = False,
) -> tuple[list[introspection.ChainCheck], list[anchor.Anchored], list[anchor.AnchorCheck], list[str]]:
    """Each agent's chain, its anchors (taken first with `take_anchor`), and a line for every decision or
    human message whose seal is not valid."""
    from wake.witness import anchor  # httpx and the RFC 3161 library: loaded by --chain, not by every command here

    conf = config.anchor
    if take_anchor and conf.tsa_url is None:
        raise ConfigError(str(config.path), "anchor.tsa_url", "--anchor needs a timestamp authority: set [anchor] tsa_url and ca_file")
    trusted = anchor.roots(config.config_relative(conf.ca_file)) if conf.ca_file else None
    async with ledger_conn(config) as conn:
        anchored = []
        if take_anchor and trusted is not None:
            anchored = await anchor.anchor_heads(conn, conf.tsa_url, trusted, clock.now(), timeout_s=conf.timeout_s, agent_id=agent_id)
        agents = [agent_id] if agent_id else await introspection.chain_agents(conn)
        checks = [
            introspection.walk(a, await introspection.chain_rows(conn, a), await introspection.chain_head(conn, a)) for a in agents
        ]
        forged = [f"approval {a.id} of {a.agent_id} ({a.tool}, {a.state} by {clip(a.decided_by)}): UNSEALED — no operator decided it "
                  "through `wake approvals`; it is not run" for a in await approvals.unsealed(conn, agent_id)]
        forged += [f"message {m.message_id} of {m.agent_id} (from {clip(m.author)}, {m.channel}): UNSEALED — not stored by `wake tell` "
                   "or the inbox, or changed since; no fact may cite it" for m in await contact.unsealed(conn, agent_id)]
        return checks, anchored, [await anchor.check_agent(conn, a, trusted) for a in agents], forged


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
