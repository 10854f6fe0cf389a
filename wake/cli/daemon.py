"""The commands about the scheduler: `wake daemon` runs it, `wake trigger` asks it for a wake,
`wake status` shows what it is doing."""

from __future__ import annotations

import sys

import click

from ledgers import introspection
from ledgers.vocab import Tier
from wake import clock, logs
from wake.cli import app, controls, health, render
from wake.cli.app import TIER_CHOICE, Context, agent_option, agent_with_tier, ledger_stores, pass_ctx, run_async
from wake.daemon import remote
from wake.errors import StoreUnavailable
from wake.observe import watch


@click.command("trigger")
@agent_option()
@click.option("--tier", type=TIER_CHOICE, default=Tier.whisper.value, show_default=True, help="Depth of the wake.")
@click.option("--no-wait", is_flag=True, help="Return once the daemon has started the wake.")
@click.option("--timeout", "timeout_s", type=app.SecondsType(0.1), default=600, show_default=True, help="Seconds to wait in all.")
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


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--watch", "watching", is_flag=True, help="Refresh a terminal view until Ctrl-C (replicas, running wakes, leases, next fires, recent outcomes)."
)
@click.option("--interval", "interval_s", type=app.SecondsType(0.2), default=2.0, show_default=True, help="Seconds between refreshes.")
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

            async def fetch() -> dict[str, object]:
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


@click.command("daemon")
@pass_ctx
def daemon_cmd(ctx: Context) -> None:
    """Run the scheduler: every agent's tiers on their schedules, until SIGTERM (docs/daemon.md).

    Logs JSON lines to stdout (journald). SIGTERM/SIGINT drain running wakes for `daemon.drain_s`
    and exit 0; SIGHUP reloads the config (a bad one is logged and the old one kept). Speaks
    systemd's notify protocol when $NOTIFY_SOCKET is set.
    """
    # The daemon's own parts are imported here, not with the module: `wake status` and `wake trigger`
    # share it and need none of them (the anchor's RFC 3161 client and its X.509 parsing alone are
    # a tenth of `wake status`'s start-up).
    from wake.cli import console
    from wake.daemon import anchoring, incident_watch, service

    config = ctx.config
    logs.configure(config.log.format, config.log.level, stream=sys.stdout)
    served = console.companion(config)  # `[console] listen`
    anchored = anchoring.companion(config)  # the daily chain anchor, when [anchor] daemon is on
    watched = incident_watch.companion()  # the open incidents into wake_open_incidents
    companions = [c for c in (served, anchored, watched) if c is not None]
    sys.exit(run_async(lambda: service.Daemon(config=config, companions=companions).run(), event_loop=config.daemon.event_loop,
                       source=str(config.path)))
