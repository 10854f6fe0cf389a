"""`wake tools findings`, `wake tools accept`, `wake tools accept-flow`, and the MCP part of `wake registry` (docs/tools.md)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from typing import Any

import click

import ledgers.rows
from ledgers import tool_flows, tool_pins
from surfaces import capability, mcp
from wake import clock
from wake.cli import app, render
from wake.cli.app import Context, ledger_conn, ledger_stores, pass_ctx, run_async
from wake.config import Config
from wake.errors import NotFound, WakeError
from wake.run import mcp_tools, session

FINDINGS_LIMIT = 50


async def registry_report(config: Config) -> dict[str, Any]:
    """The capability map; with MCP servers configured they are started for the listing (and
    closed), and each MCP tool carries its server, pin policy and pin state."""
    registry = session.build_registry(config)
    tier_binds = {f"{a}.{t}": list(conf.binds) for a, agent in config.agents.items() for t, conf in agent.tiers.items()}
    async with session.opened_mcp(config, registry, keep_alive=False):
        hub = mcp_tools.hub_of(registry)
        states = hub.states() if hub is not None else []
        cmap = capability.build(registry, tier_binds).as_dict()
        if hub is None:
            return cmap
        try:
            async with ledger_stores(config) as st:
                pins = await mcp_tools.pin_states(st, registry)
        except WakeError:  # PostgreSQL is not reachable: the pins are not known, the listing still is
            pins = await mcp_tools.pin_states(None, registry)
        by_name = {t.name: t for t in registry if isinstance(t, mcp.McpTool)}
        for entry in cmap["tools"]:
            t = by_name.get(entry["name"])
            if t is not None:
                entry.update(server=t.server, server_tool=t.remote_name, pin_policy=t.pin_policy, pin=pins.get(t.name, "unknown"),
                             bindable=bool(t.surfaces))
        cmap["mcp_servers"] = states
        return cmap


def render_report(cmap: dict[str, Any]) -> str:
    """`wake registry` with MCP servers: the capability map, then each server and MCP tool."""
    plain = capability.CapabilityMap(**{f.name: cmap[f.name] for f in dataclasses.fields(capability.CapabilityMap)})
    lines = [render.capability_map(plain), "", "mcp servers:"]
    for s in cmap.get("mcp_servers", []):
        detail = f"{len(s['tools'])} tools, version {s['version']}" if s["state"] == "ready" else s["reason"]
        lines.append(f"  {s['server']:<16} {s['transport']:<5} {s['state']:<8} pin {s['pin']:<6} {detail}")
    mcp_entries = [t for t in cmap["tools"] if "server" in t]
    if mcp_entries:
        lines.append("mcp tools:")
        for t in mcp_entries:
            surfaces = ", ".join(t["surfaces"]) or "no surface: never bound"
            lines.append(f"  {t['name']:<32} pin {t['pin']:<9} mutates {'yes' if t['mutates'] else 'no ':<3}  {surfaces}")
            lines.append(f"  {'':<32} flows {', '.join(t.get('flows', ())) or '-'}")
    return "\n".join(lines)


@click.group("tools")
def tools_group() -> None:
    """MCP tool pins and toxic flows: the findings a changed declaration or a binding raised, and accepting one."""


@tools_group.command("findings")
@click.option("--all", "include_closed", is_flag=True, help="Include accepted and superseded findings.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=FINDINGS_LIMIT, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON (with both declarations).")
@pass_ctx
def findings_cmd(ctx: Context, include_closed: bool, limit: int, as_json: bool) -> None:
    """Every open finding (an MCP tool whose declaration differs from its pin), newest first."""
    config = ctx.config

    async def body() -> tuple[list[tool_pins.Finding], list[tool_flows.Finding]]:
        async with ledger_conn(config) as conn:
            pins = await tool_pins.findings(conn, include_closed=include_closed, limit=limit)
            return pins, await tool_flows.findings(conn, include_closed=include_closed, limit=limit)

    rows, flow_rows = run_async(body)
    if as_json:
        click.echo(render.to_json([*rows, *({"kind": "toxic_flow", **dict(ledgers.rows.fields(f))} for f in flow_rows)]))
        return
    if not rows and not flow_rows:
        click.echo("no open findings" if not include_closed else "no findings")
        return
    for f in flow_rows:
        click.echo("\n".join(flow_finding_lines(f)))
    for r in rows:
        who = f"accepted by {r.accepted_by} at {r.accepted_at:%Y-%m-%d %H:%M:%S %Z}" if r.state == "accepted" else r.state
        raised = f"{r.raised_at:%Y-%m-%d %H:%M:%S %Z}"
        click.echo(f"finding {r.id}  {r.server}/{r.tool} ({r.name})  policy {r.policy}  raised {raised}  {who}")
        click.echo(f"  pinned {r.pinned_hash[:16]}  seen {r.seen_hash[:16]}")
        click.echo("\n".join(f"  {line}" for line in r.diff.splitlines()))


def _usage(message: str) -> None:
    click.echo(f"wake: {message}", err=True)
    sys.exit(2)


def _target(text: str) -> tuple[str, str]:
    server, slash, tool = text.partition("/")
    if not slash or not server or not tool:
        shown = text if len(text) <= 60 else f"{text[:60]}... ({len(text)} characters)"
        _usage(f"expected SERVER/TOOL (the server's own tool name, as `wake tools findings` shows it), got {shown!r}")
    return server, tool


@tools_group.command("accept")
@click.argument("target")
@click.option("--by", "by", type=app.WHO, required=True, help="Who accepts the new declaration (recorded).")
@click.option("--json", "as_json", is_flag=True, help="Print what was accepted as JSON.")
@pass_ctx
def accept_cmd(ctx: Context, target: str, by: str, as_json: bool) -> None:
    """Accept the newest open finding of SERVER/TOOL: its declaration becomes the pin, and the
    tool is bound again from the next wake. Records who, when, the old and new hash and the diff."""
    server, tool = _target(target)
    if not by.strip():
        _usage("--by must name who accepts")
    config = ctx.config
    at: dt.datetime = clock.now()

    async def body() -> tool_pins.Accepted:
        async with ledger_conn(config) as conn:
            done = await tool_pins.accept(conn, server, tool, by=by.strip(), at=at)
        if done is None:
            raise NotFound(f"no open finding for {server}/{tool} (see `wake tools findings`)")
        return done

    done = run_async(body)
    if as_json:
        click.echo(render.to_json({"server": server, "tool": tool, "by": by.strip(), "at": at, **dict(ledgers.rows.fields(done))}))
    else:
        was = done.pinned_hash[:16]
        click.echo(f"accepted finding {done.id}: {server}/{tool} pinned {done.seen_hash[:16]} (was {was}), by {by.strip()}")
    sys.exit(0)


def flow_finding_lines(f: tool_flows.Finding) -> list[str]:
    """A toxic flow finding as `wake tools findings` shows it."""
    who = f"accepted by {f.accepted_by} at {f.accepted_at:%Y-%m-%d %H:%M:%S %Z}" if f.accepted_at is not None else f.state
    return [
        f"toxic flow {f.flow_id}  tier {f.agent_id}.{f.tier}  policy {f.policy}  raised {f.raised_at:%Y-%m-%d %H:%M:%S %Z}  {who}",
        f"  untrusted input {', '.join(f.untrusted)}; private data {', '.join(f.private)}; egress {', '.join(f.egress)}",
    ]


@tools_group.command("accept-flow")
@click.argument("tier")
@click.argument("flow_id")
@click.option("--by", "by", required=True, help="Who accepts the flow (recorded).")
@click.option("--json", "as_json", is_flag=True, help="Print what was accepted as JSON.")
@pass_ctx
def accept_flow_cmd(ctx: Context, tier: str, flow_id: str, by: str, as_json: bool) -> None:
    """Accept the toxic flow FLOW_ID (as `wake tools findings` names it) at TIER (AGENT.TIER):
    from the next wake it is bound under `toxic_flows = refuse` and raises no finding. A flow
    whose tools change is a new flow. Records who and when."""
    agent_id, dot, tier_name = tier.partition(".")
    if not dot or not agent_id or not tier_name:
        shown = tier if len(tier) <= 60 else f"{tier[:60]}... ({len(tier)} characters)"
        _usage(f"expected AGENT.TIER, got {shown!r}")
    if not by.strip():
        _usage("--by must name who accepts")
    config = ctx.config
    at: dt.datetime = clock.now()

    async def body() -> tool_flows.Finding:
        async with ledger_conn(config) as conn:
            done = await tool_flows.accept(conn, agent_id, tier_name, flow_id, by=by.strip(), at=at)
        if done is None:
            raise NotFound(f"no open toxic flow {flow_id[:40]!r} at {tier[:60]} (see `wake tools findings`)")
        return done

    done = run_async(body)
    if as_json:
        click.echo(render.to_json(dict(ledgers.rows.fields(done))))
    else:
        click.echo(f"accepted toxic flow {done.flow_id} at {agent_id}.{tier_name}, by {by.strip()}")
    sys.exit(0)
