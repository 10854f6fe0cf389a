"""`wake workspace status`, and the workspace the CLI's checks open (docs/verify.md).

A command builds the fingerprint in its own process, in a thread (`runner="thread"`), with a
budget generous enough for a cold build; it reports on the repository as it is at HEAD now.
A workspace that cannot be fingerprinted is one line and the exit status of its kind
(`wake.errors.WorkspaceUnavailable`).
"""

from __future__ import annotations

import click

from codecheck import workspace
from wake.cli import app, render
from wake.config import Config
from wake.errors import ConfigError, WorkspaceUnavailable

CLI_BUDGET_S = 120.0  # a cold build of a large repository takes seconds; a command can wait


def open_workspace(config: Config, agent_id: str) -> workspace.Workspace:
    """The agent's workspace for one command: HEAD resolved now (no TTL), built in a thread.
    No `agents.<id>.workspace`: a ConfigError (exit 78)."""
    path = config.workspace_path(agent_id)
    if path is None:
        raise ConfigError(str(config.path), f"agents.{agent_id}.workspace", "not set: the agent has no workspace to check facts against")
    return workspace.Workspace(path, head_ttl_s=0.0, runner="thread")


def fingerprinted(ws: workspace.Workspace) -> workspace.Status:
    """Build the fingerprint of HEAD now; a WorkspaceError becomes WorkspaceUnavailable."""
    try:
        ws.fingerprint(timeout_s=CLI_BUDGET_S)
    except workspace.WorkspaceError as exc:
        raise WorkspaceUnavailable(exc.kind, f"workspace {ws.root}: {exc.kind}: {exc}") from None
    return ws.status()


@click.group("workspace")
def workspace_group() -> None:
    """The agent's workspace: the git repository its facts are checked against."""


@workspace_group.command("status")
@app.agent_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def status_cmd(obj: app.Context, agent_id: str | None, as_json: bool) -> None:
    """HEAD, the fingerprint's size and build time, and the files it skipped. Exits 66 when the
    path is not a git repository, 65 when it has no commits, 74 when its tree cannot be read."""
    config = obj.config
    agent = app.default_agent(config, agent_id)
    try:
        status = fingerprinted(open_workspace(config, agent))
    except (ConfigError, WorkspaceUnavailable) as exc:
        app.fail(exc)
        return
    if as_json:
        click.echo(render.to_json({"agent": agent, **status.as_dict()}))
    else:
        click.echo(render.workspace_status(agent, status))
