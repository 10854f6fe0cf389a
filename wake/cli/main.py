"""The `wake` commands over the wake ledger, the epistemic ledgers and the daemon. The group and
the helpers every command shares are in `wake.cli.app`; the ledger commands in `wake.cli.ledger`."""

from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any

import click

from ledgers import introspection, retractions, schema, transcripts
from ledgers import probes as probes_ledger
from ledgers.vocab import GOOD, Status, Tier, Trigger
from surfaces import capability, probe
from surfaces import epistemic as epistemic_tools
from wake import clock, logs, stores
from wake.arrival import code_check
from wake.arrival import falsifiers as epistemic
from wake.cli import actions, approvals, console, controls, costs, doctor, health, ledger, mcp_serve, memory, migrate, render, tools, workspace
from wake.cli import engines as engines_cli
from wake.cli.app import (
    AGENT_ID,
    Context,
    agent_option,
    agent_with_tier,
    cli,
    default_agent,
    fail,
    ledger_conn,
    ledger_stores,
    pass_ctx,
    resolve_wake,
    run_async,
)
from wake.context import WakeRequest
from wake.daemon import remote
from wake.errors import NotFound, StoreUnavailable, WakeError
from wake.observe import logread, watch
from wake.run import claim, cycle, session
from wake.think import prompt
from wake.witness import diff, manifest

ledger.register(cli)
engines_cli.register(cli)
controls.register(cli)
workspace.register(cli)
memory.register(cli)
tools.register(cli)
actions.register(cli)
mcp_serve.register(cli)
console.register(cli)
costs.register(cli)
approvals.register(cli)
cli.add_command(logread.logs_command)


@cli.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@pass_ctx
def doctor_cmd(ctx: Context, as_json: bool) -> None:
    """Check the config, each store's reachability and latency, the schema and the versions.

    Exits 1 if anything required (the config, PostgreSQL, Redis, Neo4j when configured, a tier's
    instructions file or pre-check, a webhook's secret, an MCP server that cannot start) fails.
    """
    config = ctx.config
    checks = run_async(lambda: doctor.run(config))
    if as_json:
        click.echo(json.dumps({"healthy": doctor.healthy(checks), "checks": doctor.as_json(checks)}, indent=2))
    else:
        click.echo(render.checks(checks))
    sys.exit(0 if doctor.healthy(checks) else 1)


@cli.command("migrate")
@click.option("--status", "show_status", is_flag=True, help="List the migrations and whether each is applied.")
@click.option("--json", "as_json", is_flag=True, help="With --status: print JSON.")
@pass_ctx
def migrate_cmd(ctx: Context, show_status: bool, as_json: bool) -> None:
    """Apply pending database migrations (safe to run concurrently), and, when Neo4j is
    configured, create the graph's missing constraints and indexes (idempotent)."""
    config = ctx.config

    async def body() -> Any:
        async with stores.connected(config, neo4j=False) as st, st.pg_conn() as conn:  # migrating is this command's job
            if show_status:
                return await schema.status(conn)
            return await schema.migrate(conn)

    result = run_async(body)
    graph_line = run_async(lambda: migrate.graph_schema(config, status_only=show_status)) if not (show_status and as_json) else None
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
        click.echo(graph_line or "graph: neo4j is not configured; no graph schema")
        return
    if result:
        for m in result:
            click.echo(f"applied {m.version:04d}_{m.name}")
    else:
        click.echo(f"schema is current (version {schema.head()})")
    click.echo(graph_line or "graph: neo4j is not configured; no graph schema")


def main() -> None:
    # Owner-only state: every file wake, its engines (which inherit it) and git create is 0600, every
    # directory 0700 (docs/isolation.md, "Owner-only state").
    os.umask(0o077)
    cli(args=hoist_config(sys.argv[1:]), prog_name="wake")


def hoist_config(args: list[str]) -> list[str]:
    """`--config F` is the group's option; accept it after the subcommand too (`wake ledger
    --config F`) by moving it to the front. Nothing after a `--` is an option."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg == "--config" and i + 1 < len(args):
            front += args[i : i + 2]
            i += 2
            continue
        if arg.startswith("--config="):
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


WORKSPACE_WARM_S = 30.0  # `wake up` waits this long for the agent's workspace fingerprint before the wake


@cli.command("up")
@agent_option()
@click.option("--tier", type=controls.TIER_CHOICE, default=Tier.whisper.value, show_default=True, help="Depth of the wake.")
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


@cli.command("show")
@click.argument("wake_id")
@click.option("--json", "as_json", is_flag=True, help="Print the row as JSON.")
@click.option("--arrival", is_flag=True, help="Print the arrival the wake saw, block by block, from the stored texts.")
@click.option("--transcript", "show_transcript", is_flag=True, help="Print the conversation as the model saw it: every message, call and answer.")
@pass_ctx
def show_cmd(ctx: Context, wake_id: str, as_json: bool, arrival: bool, show_transcript: bool) -> None:
    """Show everything recorded about one wake (an id or a unique prefix)."""
    config = ctx.config
    if arrival and show_transcript:
        raise click.UsageError("give --arrival or --transcript, not both")

    async def body() -> Any:
        async with ledger_conn(config) as conn:
            found = await resolve_wake(conn, wake_id)
            if show_transcript:
                row = await introspection.get(conn, found)
                assert row is not None
                return transcripts.as_dict(await transcripts.read(conn, found), row.columns())
            return await introspection.arrival(conn, found) if arrival else await introspection.get(conn, found)

    got = run_async(body)
    if show_transcript:
        click.echo(render.to_json(got) if as_json else render.transcript(got))
        return
    if arrival:
        click.echo(render.to_json([{"name": n, "text": t} for n, t in got]) if as_json else render.arrival(got))
        return
    click.echo(render.to_json(got.columns()) if as_json else render.row(got))


@cli.command("ledger")
@agent_option()
@click.option("--tier", type=controls.TIER_CHOICE, help="Only this tier.")
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


@cli.command("diff")
@click.argument("older", required=False)
@click.argument("newer", required=False)
@agent_option()
@click.option("--tier", type=controls.TIER_CHOICE, help="Compare within this tier (default: the tier of the agent's newest wake).")
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


@cli.command("verify")
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


@cli.command("registry")
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


@cli.command("trigger")
@agent_option()
@click.option("--tier", type=controls.TIER_CHOICE, default=Tier.whisper.value, show_default=True, help="Depth of the wake.")
@click.option("--no-wait", is_flag=True, help="Return once the daemon has started the wake.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=600, show_default=True, help="Seconds to wait in all.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@pass_ctx
def trigger_cmd(ctx: Context, agent_id: str | None, tier: str, no_wait: bool, timeout_s: float, as_json: bool) -> None:
    """Ask the running daemon, through Redis, to run a wake now; print its id and wait for the outcome.

    Exits 0 when the wake settles completed or quiet (or, with --no-wait, once it has started),
    1 when it settles otherwise or the daemon refuses, 69 when no daemon is alive, 75 on timeout.
    """
    config = ctx.config
    agent = agent_with_tier(config, agent_id, tier)

    def started(result: remote.TriggerResult) -> None:
        if not as_json:
            click.echo(f"wake {result.wake_id}")

    try:
        result = run_async(lambda: remote.trigger(config, agent, tier, wait=not no_wait, timeout_s=timeout_s, on_started=started))
    except KeyboardInterrupt:
        # trigger() has withdrawn the request if no daemon had taken it yet.
        click.echo("wake: interrupted", err=True)
        sys.exit(130)
    if as_json:
        click.echo(render.to_json(result.as_dict()))
    else:
        lines = render.trigger_lines(result, timeout_s)
        if result.outcome in ("timeout", "refused"):
            click.echo("\n".join(f"wake: {line}" for line in lines), err=True)
        else:
            click.echo("\n".join(lines))
    sys.exit(result.exit_code)


@cli.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--watch", "watching", is_flag=True, help="Refresh a terminal view until Ctrl-C (replicas, running wakes, leases, next fires, recent outcomes)."
)
@click.option("--interval", "interval_s", type=click.FloatRange(min=0.2), default=2.0, show_default=True, help="Seconds between refreshes.")
@pass_ctx
def status_cmd(ctx: Context, as_json: bool, watching: bool, interval_s: float) -> None:
    """Live daemon replicas, the wakes running now, the leases held, the next fire per agent and tier."""
    config = ctx.config
    if watching and as_json:
        raise click.UsageError("--watch draws a terminal view; it does not go with --json")
    if not watching:
        result = run_async(lambda: health.status_with_stores(config))
        click.echo(render.to_json(result) if as_json else "\n".join(render.status_lines(result)))
        if not all(s["ok"] for s in result["stores"]):
            sys.exit(StoreUnavailable.exit_code)
        return

    async def body() -> None:
        async with ledger_stores(config) as st:

            async def fetch() -> dict[str, Any]:
                snap = await remote.status(config)
                async with st.pg_conn() as conn:
                    snap["recent"] = [r.columns() for r in await introspection.recent(conn, limit=10)]
                snap.update(await controls.snapshot(config, clock.now()))
                return snap

            await watch.watch(fetch, interval_s)

    try:
        run_async(body)
    except KeyboardInterrupt:
        sys.exit(130)


# -- retractions and claim probes (logic in wake.epistemic and surfaces.epistemic) -------------


def _aware(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    import datetime as dt

    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"expected an ISO 8601 time, got {value!r}") from exc
    if parsed.tzinfo is None:
        raise click.BadParameter(f"expected a time with a UTC offset (e.g. 2026-11-26T10:00+01:00), got {value!r}")
    return parsed


@cli.command("retract")
@agent_option()
@click.option("--claim-verbatim", required=True, help="The claim as it was made, word for word.")
@click.option("--stood-on", required=True, help="What the claim rested on.")
@click.option("--why-wrong", required=True, help="Why it was wrong.")
@click.option("--corrected-claim", required=True, help="What is held instead now.")
@click.option("--caught-by", type=click.Choice(retractions.CAUGHT_BY), default="self", show_default=True)
@click.option(
    "--row-class", type=click.Choice(retractions.ROW_CLASSES), default="claim", show_default=True, help="claim: a belief; send: something sent."
)
@click.option("--test-procedure", required=True, help="The falsifier: what to do to test the retraction.")
@click.option("--expected-retraction-pass-obs", required=True, help="Observed if the retraction stands (verdict overturned).")
@click.option("--overturn-retraction-condition", required=True, help="Observed if the original claim was right (verdict upheld); must differ.")
@click.option("--corrected-at", callback=_aware, help="When it was corrected (ISO 8601 with offset). Default: now.")
@click.option("--maturity-days", type=click.IntRange(0), help="Days until the falsifier is due. Default: retractions.falsifier_maturity_days.")
@click.option("--probe-target", help="A probe of the pass observation: a path inside the probe roots.")
@click.option("--probe-mode", type=click.Choice(probe.MODES), help="exists, missing or contains.")
@click.option("--probe-needle", help="With --probe-mode contains: the literal string.")
@click.option("--probe-negate", is_flag=True, help="With --probe-mode contains: the needle must NOT be there.")
@click.option("--fact", "fact_id", help="The stored fact (full id) this retracts: it is marked refuted in the same transaction.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored row as JSON.")
@pass_ctx
def retract_cmd(
    ctx: Context, /, agent_id: str | None, corrected_at: Any, maturity_days: int | None, fact_id: str | None, as_json: bool, **fields: Any,
) -> None:
    """Record a retraction with its typed falsifier. Identical observations are refused (exit 65), and
    so is a --fact that is not one of the agent's active facts."""
    config = ctx.config
    agent = default_agent(config, agent_id)

    async def body() -> Any:
        with epistemic.refused_as_invalid():
            new = epistemic_tools.new_retraction(agent, fields, corrected_at or clock.now())
            fact = epistemic_tools.fact_ref(fact_id)
        days = config.retractions.falsifier_maturity_days if maturity_days is None else maturity_days
        async with ledger_stores(config) as st:
            async with epistemic.writer(st)() as conn:
                with epistemic.refused_as_invalid():
                    return await epistemic_tools.insert_retraction(conn, new, days, fact)

    row = run_async(body)
    if as_json:
        click.echo(render.to_json(row))
    else:
        refuted = f"; fact {fact_id} is marked refuted" if fact_id else ""
        click.echo(f"retraction {row.id} recorded; its falsifier is due from {row.matures_at:%Y-%m-%d %H:%M %Z}{refuted}")


@cli.command("retractions")
@click.option("--agent", "agent_id", type=AGENT_ID, help="Only this agent (default: every agent).")
@click.option("--due", is_flag=True, help="Only unchecked falsifiers that have matured by now.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {total, rows}.")
@pass_ctx
def retractions_cmd(ctx: Context, agent_id: str | None, due: bool, limit: int, as_json: bool) -> None:
    """The retraction ledger, newest corrections first, with the exact total."""
    config = ctx.config
    if agent_id:
        default_agent(config, agent_id)

    async def body() -> Any:
        async with ledger_conn(config) as conn:
                return await retractions.listing(conn, agent_id=agent_id, due_at=clock.now() if due else None, limit=limit)

    rows, total = run_async(body)
    zone = config.agents[agent_id].timezone if agent_id else "UTC"
    click.echo(render.to_json({"total": total, "rows": rows}) if as_json else render.retractions(rows, total, zone))


@cli.command("probe")
@agent_option()
@click.option("--target", help="A path inside the probe roots (relative to the first root).")
@click.option("--mode", type=click.Choice(probe.MODES), help="exists, missing or contains.")
@click.option("--needle", help="With --mode contains: the literal string, searched byte for byte.")
@click.option("--negate", is_flag=True, help="With --mode contains: the claim is that the needle is NOT there.")
@click.option("--assertion", help="The claim in words, kept with the record; it never changes the verdict.")
@click.option("--retraction", "retraction_ref", help="The retraction (id or unique prefix) this probe bears on.")
@click.option("--self-test", is_flag=True, help="Run only the dual-needle controls, print them; exit 1 if the instrument fails them.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def probe_cmd(
    ctx: Context, agent_id: str | None, target: str | None, mode: str | None, needle: str | None, negate: bool,
    assertion: str | None, retraction_ref: str | None, self_test: bool, as_json: bool,
) -> None:
    """Probe a claim about a file, record it, print the verdict and evidence.

    Exit 0 for verified / verified_missing, 1 for falsified or error. With --self-test: run the
    instrument's dual-needle controls instead (no store is opened).
    """
    config = ctx.config
    inst = epistemic_tools.instrument(config.tool_settings())
    if self_test:
        test = inst.self_test()
        click.echo(render.to_json({"passed": test.passed, "controls": test.controls}) if as_json else render.probe_self_test(test))
        sys.exit(0 if test.passed else 1)
    if not target or not mode:
        raise click.UsageError("give --target and --mode (or --self-test)")
    agent = default_agent(config, agent_id)
    try:
        with epistemic.refused_as_invalid():
            spec = epistemic_tools.make_spec(target, mode, needle, negate, assertion)
    except WakeError as exc:
        fail(exc)

    async def body() -> Any:
        async with ledger_stores(config) as st:
            rid = None
            if retraction_ref:
                async with st.pg_conn() as conn:
                    rid = await epistemic.resolve_retraction(conn, retraction_ref, agent)
            return await epistemic_tools.run_probe(spec, inst=inst, write=epistemic.writer(st), agent_id=agent, now=clock.now(), retraction_id=rid)

    result, record_id = run_async(body)
    if as_json:
        click.echo(render.to_json({"record_id": record_id, "verdict": result.verdict, "evidence": result.evidence,
                                   "instrument": result.instrument_state, "resolved_path": result.resolved_path, "controls": result.controls}))
    else:
        click.echo(render.probe_result(result))
    sys.exit(0 if result.verdict in ("verified", "verified_missing") else 1)


@cli.command("probes")
@click.option("--agent", "agent_id", type=AGENT_ID, help="Only this agent (default: every agent).")
@click.option("--retraction", "retraction_ref", help="Only probes of this retraction (id or unique prefix).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON (evidence and controls included).")
@pass_ctx
def probes_cmd(ctx: Context, agent_id: str | None, retraction_ref: str | None, limit: int, as_json: bool) -> None:
    """Recent claim-probe records, newest first."""
    config = ctx.config

    async def body() -> Any:
        async with ledger_conn(config) as conn:
                rid = await epistemic.resolve_retraction(conn, retraction_ref, agent_id) if retraction_ref else None
                return await probes_ledger.recent(conn, agent_id=agent_id, retraction_id=rid, limit=limit)

    rows = run_async(body)
    click.echo(render.to_json(rows) if as_json else render.probe_records(rows))




@cli.command("daemon")
@pass_ctx
def daemon_cmd(ctx: Context) -> None:
    """Run the scheduler: every agent's tiers on their schedules, until SIGTERM (docs/daemon.md).

    Logs JSON lines to stdout (journald). SIGTERM/SIGINT drain running wakes for `daemon.drain_s`
    and exit 0; SIGHUP reloads the config (a bad one is logged and the old one kept). Speaks
    systemd's notify protocol when $NOTIFY_SOCKET is set.
    """
    from wake.daemon import service as daemon

    config = ctx.config
    logs.configure(config.log.format, config.log.level, stream=sys.stdout)
    served = console.companion(config)  # `[console] listen`
    sys.exit(run_async(lambda: daemon.Daemon(config=config, companions=[served] if served else []).run()))
