"""`wake memory ...`: an operator's view of an agent's memory and the Cloister findings (docs/memory.md).

Reads come from the repository's branch tip (`ls`, `show`, `log`, `diff`) and the memory ledgers;
`audit` runs the canary now, as a wake's start would; `ack` and `revert` are a human acting on
findings, the only way an open HALT is lifted. Listed in `wake.cli.commands`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from ledgers import memory_ledger
from memory.repo import MemoryRepo
from untrusted import spotlight
from wake import clock
from wake.cli import app, render
from wake.daemon.commands import open_repo, refused
from wake.errors import WakeError
from wake.stores import lease

STATES = (*memory_ledger.FINDING_STATES, "all")


def _echo(as_json: bool, value: object, lines: list[str]) -> None:
    click.echo(render.to_json(value) if as_json else "\n".join(lines))


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group("memory")
def memory_group() -> None:
    """The agent's memory repository and its Cloister findings."""


@memory_group.command("ls")
@click.argument("directory", required=False, default="")
@app.agent_option()
@json_option
@click.pass_obj
def ls_cmd(obj: app.Context, directory: str, agent_id: str | None, as_json: bool) -> None:
    """The files (under DIRECTORY) at the branch's tip, with their descriptions and sizes."""
    config = obj.config
    agent = app.default_agent(config, agent_id)

    def body() -> tuple[MemoryRepo, list[Any]]:
        repo = open_repo(config, agent, clock.now())
        with refused():
            return repo, repo.ls(directory)

    repo, entries = _run(body)
    files = [dataclasses.asdict(e) for e in entries]
    _echo(as_json, {"agent": agent, "head": repo.head(), "total": len(files), "files": files}, render.memory_files(files, repo.head()))


@memory_group.command("show")
@click.argument("path")
@click.option("--rev", help="A commit (id or prefix) to read the file at, instead of the tip.")
@app.agent_option()
@json_option
@click.pass_obj
def show_cmd(obj: app.Context, path: str, rev: str | None, agent_id: str | None, as_json: bool) -> None:
    """One file as committed (at the tip, or at --rev)."""
    config = obj.config
    agent = app.default_agent(config, agent_id)

    def body() -> object:
        repo = open_repo(config, agent, clock.now())
        with refused():
            return repo.read(path, commit=rev)

    view = _run(body)
    if as_json:
        click.echo(render.to_json(dataclasses.asdict(view)))
    else:
        shown = spotlight.terminal(view.text)  # the operator reads a flagged file whole, to judge it; nothing in it is hidden
        click.echo(shown, nl=not shown.endswith("\n"))


@memory_group.command("log")
@click.argument("path", required=False)
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@app.agent_option()
@json_option
@click.pass_obj
def log_cmd(obj: app.Context, path: str | None, limit: int, agent_id: str | None, as_json: bool) -> None:
    """The newest commits (touching PATH), each with the memory write that made it; a commit with
    none was made around the tool."""
    config = obj.config
    agent = app.default_agent(config, agent_id)

    async def body() -> tuple[list[Any], dict[str, memory_ledger.MemoryWrite], int]:
        repo = open_repo(config, agent, clock.now())
        with refused():
            entries = repo.log(path, limit=limit)
        async with app.ledger_conn(config) as conn:
            rows, total = await memory_ledger.recent_writes(conn, agent, path=path, limit=max(limit * 4, 200))
        return entries, {r.commit_id: r for r in rows}, total

    entries, writes, total = app.run_async(body)
    commits = [{"commit": e.commit, "at": e.at, "author": e.author, "summary": e.summary, "trailers": e.trailers, "paths": e.paths,
                "write": writes.get(e.commit)} for e in entries]
    _echo(as_json, {"agent": agent, "path": path, "writes_recorded": total, "commits": commits}, render.memory_log(commits, total))


@memory_group.command("diff")
@click.argument("rev", required=False)
@click.option("--path", help="Only this file.")
@app.agent_option()
@json_option
@click.pass_obj
def diff_cmd(obj: app.Context, rev: str | None, path: str | None, agent_id: str | None, as_json: bool) -> None:
    """REV against its parent; without REV, the work tree's uncommitted changes against the tip
    (what the next canary will report)."""
    config = obj.config
    agent = app.default_agent(config, agent_id)

    def body() -> str:
        repo = open_repo(config, agent, clock.now())
        with refused():
            return repo.diff(path, commit=rev) if rev else repo.diff(path, worktree=True)

    text = _run(body)
    if as_json:
        click.echo(render.to_json({"agent": agent, "rev": rev, "path": path, "diff": text}))
    else:
        click.echo(text or ("(no change)" if rev else "(no uncommitted change)"), nl=not text.endswith("\n"))


@memory_group.command("audit")
@click.argument("path", required=False)
@app.agent_option()
@json_option
@click.pass_obj
def audit_cmd(obj: app.Context, path: str | None, agent_id: str | None, as_json: bool) -> None:
    """Run the Cloister canary now (as a wake's start does) and show its audit and the open
    findings (about PATH). Exits 1 while a HALT is open."""
    config = obj.config
    agent = app.default_agent(config, agent_id)

    async def body() -> tuple[memory_ledger.CanaryResult, memory_ledger.AuditMark | None, list[memory_ledger.FindingRecord], int]:
        at = clock.now()
        repo = open_repo(config, agent, at)
        async with app.ledger_stores(config) as st:
            result = await memory_ledger.run_canary(st.pg_conn, lambda: lease.fenced(st, agent, None), repo, agent_id=agent, wake_id=None, at=at)
            async with st.pg_conn() as conn:
                last = await memory_ledger.last_audit(conn, agent)
                rows, total = await memory_ledger.findings(conn, agent, state="open", limit=10_000 if path else 50)
        if path:
            rows = [r for r in rows if r.path == path]
            total = len(rows)
        return result, last, rows, total

    result, last, rows, total = app.run_async(body)
    scope = result.audit.range
    value = {
        "agent": agent, "head": scope.head, "since": scope.since, "commits": len(scope.commits), "findings": len(result.audit.findings),
        "new": [{"id": i, "severity": f.severity.value, "rule": f.rule, "path": f.path, "commit": f.commit} for i, f in result.new],
        "halted": result.has_open_halt, "last_audit": last, "open_total": total, "open": rows,
    }
    _echo(as_json, value, render.memory_audit(value))
    raise SystemExit(1 if result.has_open_halt else 0)


@memory_group.command("findings")
@click.option("--state", type=click.Choice(STATES), default="open", show_default=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@app.agent_option()
@json_option
@click.pass_obj
def findings_cmd(obj: app.Context, state: str, limit: int, agent_id: str | None, as_json: bool) -> None:
    """The canary's findings, newest first (open ones by default)."""
    config = obj.config
    agent = app.default_agent(config, agent_id)

    async def body() -> tuple[list[memory_ledger.FindingRecord], int]:
        async with app.ledger_conn(config) as conn:
            return await memory_ledger.findings(conn, agent, state=None if state == "all" else state, limit=limit)

    rows, total = app.run_async(body)
    _echo(as_json, {"agent": agent, "state": state, "total": total, "findings": rows}, render.memory_findings(rows, total, state))


@memory_group.command("ack")
@click.argument("finding_ids", nargs=-1, required=True, type=app.ROW_ID)
@click.option("--by", "by", type=app.WHO, required=True, help="Who acknowledges (recorded with the finding).")
@click.option("--note", help="Why, in a line.")
@app.agent_option()
@json_option
@click.pass_obj
def ack_cmd(obj: app.Context, finding_ids: tuple[int, ...], by: str, note: str | None, agent_id: str | None, as_json: bool) -> None:
    """Acknowledge open findings: a WARN leaves the cloister block, a HALT stops holding the
    agent's wakes (once every open HALT is acted on). Exits 1 if any ID was not open."""
    config = obj.config
    agent = app.default_agent(config, agent_id)

    async def body() -> tuple[list[int], bool]:
        async with app.ledger_conn(config) as conn:
            with refused():
                done = await memory_ledger.ack(conn, agent, list(finding_ids), by=by, note=note, at=clock.now())
            return done, await memory_ledger.has_open_halt(conn, agent)

    done, halted = app.run_async(body)
    skipped = sorted(set(finding_ids) - set(done))
    value = {"agent": agent, "acknowledged": done, "not_open": skipped, "halted": halted}
    lines = [f"acknowledged {', '.join(f'#{i}' for i in done) or 'nothing'} (by {by})"]
    if skipped:
        lines.append(f"not open (unknown, or already acted on): {', '.join(f'#{i}' for i in skipped)}")
    lines.append("a HALT is still open: the agent's wakes stay halted" if halted else "no HALT is open: the agent's next wake thinks")
    _echo(as_json, value, lines)
    raise SystemExit(1 if skipped else 0)


@memory_group.command("revert")
@click.argument("commit", required=False)
@click.option("--finding", "finding_id", type=app.ROW_ID, help="Revert what this finding points at, instead of a COMMIT.")
@click.option("--path", help="The file to revert when COMMIT changed more than one.")
@click.option("--by", "by", type=app.WHO, required=True, help="Who reverts (the author of the revert commit).")
@click.option("--note", help="Why, in a line.")
@app.agent_option()
@json_option
@click.pass_obj
def revert_cmd(
    obj: app.Context, commit: str | None, finding_id: int | None, path: str | None, by: str, note: str | None, agent_id: str | None,
    as_json: bool,
) -> None:
    """Undo what COMMIT did to one file with a new commit (recorded, op `revert`, author --by),
    settling its findings there; or, with --finding, what one finding points at (an uncommitted
    change is discarded from the work tree)."""
    config = obj.config
    agent = app.default_agent(config, agent_id)
    if (commit is None) == (finding_id is None):
        raise click.UsageError("give a COMMIT or --finding ID (one of them)")
    if finding_id is not None and path is not None:
        raise click.UsageError("--path goes with a COMMIT; a finding names its own file")

    async def body() -> dict[str, Any]:
        at = clock.now()
        repo = open_repo(config, agent, at)
        async with app.ledger_conn(config) as conn:
            with refused():
                if finding_id is not None:
                    done, record = await memory_ledger.revert_finding(conn, repo, agent, finding_id, by=by, note=note, at=at)
                    settled = [finding_id]
                else:
                    assert commit is not None
                    record, settled = await memory_ledger.revert_commit(conn, repo, agent, commit, by=by, path=path, note=note, at=at)
                    done = f"{record.result.path}: reverted in {record.result.commit[:12]}"
            halted = await memory_ledger.has_open_halt(conn, agent)
        return {"agent": agent, "done": done, "commit": record.result.commit if record else None, "write_id": record.write_id if record else None,
                "findings_reverted": settled, "halted": halted}

    value = app.run_async(body)
    lines = [value["done"], f"findings settled as reverted: {', '.join(f'#{i}' for i in value['findings_reverted']) or 'none'}"]
    lines.append("a HALT is still open: the agent's wakes stay halted" if value["halted"] else "no HALT is open: the agent's next wake thinks")
    _echo(as_json, value, lines)


def _run(fn: Any) -> Any:
    """A synchronous body with the same one-line failures as `app.run_async`."""
    try:
        return fn()
    except WakeError as exc:
        app.fail(exc)
