"""`wake engines`: the embedded PostgreSQL and Redis, which linger `engines.idle_s` after the last
command that used them (docs/performance.md).

Listed in `wake.cli.commands`.
"""

from __future__ import annotations

import click

from wake.cli import app
from wake.errors import EnginesBusy
from wake.stores import engines


@click.group("engines")
def engines_group() -> None:
    """The embedded engines (no DSN configured): they linger engines.idle_s after the last command."""


@engines_group.command("stop")
@click.option("--force", is_flag=True, help="Stop them even while a wake process (a daemon) uses them.")
@click.pass_obj
def stop_cmd(obj: app.Context, force: bool) -> None:
    """Stop the state directory's embedded engines now, instead of after their idle time."""
    state_dir = obj.config.state_dir_path()
    try:
        stopped = engines.stop(state_dir, force=force)
    except EnginesBusy as exc:
        app.fail(exc)
    click.echo(f"stopped {', '.join(stopped)}" if stopped else "no embedded engine was running")
