"""`wake console`: the operator console in the foreground (docs/console.md); and the console as
the daemon's companion when `[console] listen` is set. Listed in `wake.cli.commands`."""

from __future__ import annotations

import asyncio
import signal

import click

from wake.cli import app
from wake.config import Config
from wake.console import serve
from wake.daemon import signals
from wake.errors import WakeError


def companion(config: Config) -> serve.Runner | None:
    """The console the daemon serves, or None without `[console] listen`. Its guard is read now,
    so a listen address that needs a token and has none stops the daemon's start (exit 78)."""
    listen = config.console.listen
    if listen is None:
        return None
    try:
        guard = serve.guard_for(config, listen, read_only=config.console.read_only)
    except WakeError as exc:
        app.fail(exc)
        raise
    return serve.Runner(lambda: config, listen=listen, guard=guard)


@click.command("console")
@click.option("--listen", help=f"HOST:PORT to serve on. Default: [console] listen, else {serve.DEFAULT_LISTEN}.")
@click.option("--read-only", is_flag=True, help="Offer and accept no action (also [console] read_only).")
@app.pass_ctx
def console_cmd(ctx: app.Context, listen: str | None, read_only: bool) -> None:
    """Serve the operator console: the timeline, each wake, each agent, and the operator's actions,
    until Ctrl-C or SIGTERM.

    Loopback needs no token to read; acting needs the token ($CREDENTIALS_DIRECTORY/wake_console_token
    or $WAKE_CONSOLE_TOKEN), and any other address needs it for every page. Exits 78 for an address
    that cannot be served.
    """
    config = ctx.config
    address = listen or config.console.listen or serve.DEFAULT_LISTEN
    try:
        guard = serve.guard_for(config, address, read_only=read_only or config.console.read_only)
    except WakeError as exc:
        app.fail(exc)
    runner = serve.Runner(lambda: config, listen=address, guard=guard)

    async def body() -> None:
        stop = asyncio.Event()

        def on_stop(_sig: int) -> None:
            stop.set()

        installed = signals.install(asyncio.get_running_loop(), {signal.SIGTERM: on_stop, signal.SIGINT: on_stop})
        try:
            await serve_until(stop)
        finally:
            installed.remove()

    async def serve_until(stop: asyncio.Event) -> None:
        async with app.ledger_stores(config) as st:
            serving = asyncio.create_task(runner.run(st, stop))
            started = asyncio.create_task(runner.started.wait())
            # a failed bind ends `serving` (ListenError, exit 78) without ever setting `started`
            await asyncio.wait({serving, started}, return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            if runner.started.is_set():
                click.echo(f"wake console on {runner.url}" + (" (read-only)" if guard.read_only else ""), err=True)
            await serving

    app.run_async(body)
