"""`wake approvals`: the calls that wait for an operator, and deciding them (docs/approvals.md).

`wake approvals [--agent A] [--all] [--json]` lists them, newest first; `wake approvals approve
ID --by NAME` and `wake approvals reject ID --by NAME [--why TEXT]` decide one, once. Bad input
(an id that is not a positive integer, an empty or over-long name, an unknown agent) is one line
and exit 65; a decision on an approval decided before, or expired, is refused, one line, exit 65,
and changes nothing; so is an id of another agent's approval when `--agent` names one (`wake
approvals --agent alice approve 3`); an id that matches no approval is one line, exit 1.

Listing first expires what has waited `[tools] approval_ttl` (`ledgers.approvals.expire`), and
shows those it expired with the open ones; a decision does the same for its approval.
"""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo

import click

import ledgers.approvals
from ledgers.approvals import Approval
from wake import clock
from wake.cli import render
from wake.cli.app import AGENT_ID, Context, clip, default_agent, fail, ledger_conn, pass_ctx, run_async
from wake.config import Config
from wake.daemon import commands
from wake.errors import InvalidInput

LIST_LIMIT = 50
NAME_MAX = 100  # characters of --by
WHY_MAX = 1000  # characters of --why
SCOPE = "wake.approvals.agent"  # the click context's meta key: the agent `--agent` named, for approve|reject


def _when(at: dt.datetime | None, zone: zoneinfo.ZoneInfo) -> str:
    return f"{at.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}" if at is not None else "-"


def _zone(config: Config, agent_id: str) -> zoneinfo.ZoneInfo:
    agent = config.agents.get(agent_id)
    return zoneinfo.ZoneInfo(agent.timezone if agent is not None else "UTC")


def lines(a: Approval, zone: zoneinfo.ZoneInfo) -> list[str]:
    """One approval as `wake approvals` prints it."""
    arguments = json.dumps(a.arguments, sort_keys=True, ensure_ascii=False, default=str)
    shown = arguments if len(arguments) <= 160 else f"{arguments[:160]}… ({len(arguments)} characters)"
    out = [
        f"approval {a.id}  {a.agent_id}  {a.state}  {a.tool} {shown}",
        f"  asked {_when(a.requested_at, zone)} in wake {str(a.wake_id)[:8]} ({a.tier}, turn {a.turn})",
        f"  reason ({a.reason_from}): {' '.join(a.reason.split())[:300] or '(none given)'}",
    ]
    if a.state == "expired":
        out.append(f"  expired at {_when(a.decided_at, zone)}: not decided within [tools] approval_ttl of its asking; it will not run")
    elif a.decided_by is not None:
        decided = "approved" if a.state != "rejected" else "rejected"
        out.append(f"  {decided} by {a.decided_by} at {_when(a.decided_at, zone)}" + (f": {a.why}" if a.why else ""))
    if a.run_wake_id is not None:
        out.append(f"  claimed by wake {str(a.run_wake_id)[:8]} at {_when(a.claimed_at, zone)}")
    if a.state in ("ran", "not_run", "interrupted"):
        result = " ".join((a.result or "").split())
        what = f"ran: {a.outcome}" if a.state == "ran" else a.state.replace("_", " ")
        out.append(f"  {what} at {_when(a.finished_at, zone)}: {result[:300]}" + ("…" if len(result) > 300 else ""))
    return out


def _approval_id(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1 or len(text) > 18:
        fail(InvalidInput(f"expected an approval id (a positive integer, as `wake approvals` shows it), got {clip(text)}"))
    return int(text)


def _checked_text(option: str, text: str | None, limit: int, *, required: bool) -> str | None:
    if text is None:
        return None
    value = " ".join(text.split())
    if not value and required:
        fail(InvalidInput(f"{option} must name who decides"))
    if len(value) > limit:
        fail(InvalidInput(f"{option} is {len(value)} characters; at most {limit}"))
    return value or None


@click.group("approvals", invoke_without_command=True)
@click.option("--agent", "agent_id", type=AGENT_ID, help="Only this agent's approvals.")
@click.option("--all", "include_closed", is_flag=True, help="Every approval, decided and run ones too (default: the open ones).")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=LIST_LIMIT, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the approvals as JSON (every column).")
@click.pass_context
def approvals_group(click_ctx: click.Context, agent_id: str | None, include_closed: bool, limit: int, as_json: bool) -> None:
    """Tool calls that wait for an operator: pending (a decision is due), approved (they run at the
    agent's next wake that holds the tool) and running, and those this listing found past `[tools]
    approval_ttl` and expired; `--all` adds the decided, expired and finished ones."""
    ctx = click_ctx.find_object(Context)
    assert ctx is not None
    config = ctx.config
    agent = default_agent(config, agent_id) if agent_id is not None else None
    if click_ctx.invoked_subcommand is not None:
        click_ctx.meta[SCOPE] = agent  # approve|reject decide only this agent's approvals
        return

    at = clock.now()

    async def body() -> list[Approval]:
        async with ledger_conn(config) as conn:
            await ledgers.approvals.expire(conn, agent_id=agent, ttl_s=config.tools.approval_ttl, at=at)
            return await ledgers.approvals.listed(conn, agent_id=agent, include_closed=include_closed, limit=limit, expired_since=at)

    rows = run_async(body)
    if as_json:
        click.echo(render.to_json(rows))
        return
    if not rows:
        click.echo("no open approvals" if not include_closed else "no approvals")
        return
    for a in rows:
        click.echo("\n".join(lines(a, _zone(config, a.agent_id))))


def _decide(ctx: Context, decision: str, id_text: str, by: str, why: str | None, as_json: bool) -> None:
    agent: str | None = click.get_current_context().meta.get(SCOPE)
    approval_id = _approval_id(id_text)
    who = _checked_text("--by", by, NAME_MAX, required=True)
    reason = _checked_text("--why", why, WHY_MAX, required=False)
    assert who is not None
    config = ctx.config
    at = clock.now()

    async def body() -> Approval:
        async with ledger_conn(config) as conn:
            return await commands.decide_approval(conn, config, approval_id, decision, by=who, why=reason, at=at, agent_id=agent)

    done = run_async(body)
    if as_json:
        click.echo(render.to_json(done))
        return
    then = f"it runs at {done.agent_id}'s next wake that holds {done.tool}" if decision == "approved" else "it will not run"
    click.echo(f"{decision} approval {done.id}: {done.tool} of {done.agent_id}, by {who}; {then}")


@approvals_group.command("approve")
@click.argument("approval_id", metavar="ID")
@click.option("--by", "by", required=True, help="Who approves (recorded).")
@click.option("--why", "why", help="Why (recorded, shown to the agent).")
@click.option("--json", "as_json", is_flag=True, help="Print the decided approval as JSON.")
@pass_ctx
def approve_cmd(ctx: Context, approval_id: str, by: str, why: str | None, as_json: bool) -> None:
    """Approve a pending call: it runs at the agent's next wake that holds its tool, under that
    wake's fence, checked against that wake's binding; its result is in that wake's arrival."""
    _decide(ctx, "approved", approval_id, by, why, as_json)


@approvals_group.command("reject")
@click.argument("approval_id", metavar="ID")
@click.option("--by", "by", required=True, help="Who rejects (recorded).")
@click.option("--why", "why", help="Why (recorded, shown to the agent in its next arrival).")
@click.option("--json", "as_json", is_flag=True, help="Print the decided approval as JSON.")
@pass_ctx
def reject_cmd(ctx: Context, approval_id: str, by: str, why: str | None, as_json: bool) -> None:
    """Reject a pending call: it never runs; the agent's next arrival says who rejected it and why."""
    _decide(ctx, "rejected", approval_id, by, why, as_json)

