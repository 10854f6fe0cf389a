"""`wake costs`: what the wakes cost, from the ledger (docs/operator.md, "What it costs").

Tokens (prompt, cached, completion), turns and cost per day, tier or agent; the wakes by outcome,
silent ones included; the wakes that ended before any model call (the whisper gate, a pre-check's
exit 1, a spent daily cap) and those the ok_token kept quiet; and each capped agent's headroom
today. Every figure is a sum over `wake_introspection_ledger` rows, so it agrees with them.

Bad input (an unknown agent, a --since that does not parse or lies ahead) is one line, `wake: …`,
and exit 65.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections import Counter
from decimal import Decimal
from typing import Any

import click

from ledgers import costs, rows
from ledgers.vocab import Status
from wake import clock
from wake.cli import app, render
from wake.config import Config, clip, parse_duration_s
from wake.errors import InvalidInput

DEFAULT_SINCE = "7d"
SINCE_HELP = "a duration back from now (7d, 12h), or an ISO 8601 date or time, local to the agent (UTC over several agents) unless it has an offset"
SUMMED = ("wakes", "prompt_tokens", "cached_tokens", "completion_tokens", "turns", "gated", "prechecked", "ok_token", "capped")


def parse_since(text: str, now: dt.datetime, zone: str) -> dt.datetime:
    """The start of the window an operator typed, as an aware datetime. Raises InvalidInput (one line)."""
    value = text.strip()
    if re.fullmatch(r"\d+\s*[smhd]", value):
        try:
            return now - dt.timedelta(seconds=parse_duration_s(value))
        except ValueError as exc:
            raise InvalidInput(f"cannot read --since {clip(text)}: {exc}") from None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"cannot read --since {clip(text)}: expected {SINCE_HELP}") from None
    since = parsed if parsed.tzinfo else parsed.replace(tzinfo=zoneinfo.ZoneInfo(zone))
    if since > now:
        raise InvalidInput(f"--since {clip(text)} is {since.isoformat()}, which lies ahead")
    return since


def _zones(config: Config, agent_id: str | None) -> dict[str, str]:
    if agent_id is not None and agent_id not in config.agents:
        raise InvalidInput(f"no agent {agent_id!r} is configured; known: {', '.join(sorted(config.agents))}")
    return {a: c.timezone for a, c in config.agents.items() if agent_id in (None, a)}


def total(groups: list[costs.Group]) -> dict[str, object]:
    """The sum of the groups (exact: costs are Decimals), outcomes merged."""
    out: dict[str, object] = {k: sum(getattr(g, k) for g in groups) for k in SUMMED}
    out["cost_usd"] = sum((g.cost_usd for g in groups), Decimal(0))
    outcomes: Counter[str] = Counter()
    for g in groups:
        outcomes.update(g.outcomes)
    out["outcomes"] = {s.value: outcomes[s] for s in Status if s in outcomes}
    return out


def headroom(config: Config, spent: list[costs.Spent]) -> list[dict[str, Any]]:
    """Each agent's daily cap (None: no cap), what its rows spent today, and what is left (never below 0)."""
    lines = []
    for s in spent:
        cap = config.agents[s.agent_id].daily_cost_cap_usd
        cap_usd = None if cap is None else Decimal(str(cap))
        left = None if cap_usd is None else max(Decimal(0), cap_usd - s.spent_usd)
        lines.append({"agent_id": s.agent_id, "cap_usd": cap_usd, "spent_today_usd": s.spent_usd, "headroom_usd": left})
    return lines


def _outcomes(o: dict[str, int]) -> str:
    """`completed 2, quiet 3`, in the order of `Status`."""
    return ", ".join(f"{s} {o[s]}" for s in Status if s in o) or "-"


def _usd(value: Decimal) -> str:
    return f"${value:.4f}"


def lines(report: dict[str, Any]) -> list[str]:
    """The report as text: one line per group, the total, each agent's cap."""
    head = [report["by"].upper(), "WAKES", "OUTCOMES", "PROMPT", "CACHED", "COMPLETION", "TURNS", "COST", "NO CALL (gate/precheck/cap)", "OK_TOKEN"]

    def cells(key: str, g: dict[str, Any]) -> list[object]:
        return [
            key, g["wakes"], _outcomes(g["outcomes"]), g["prompt_tokens"], g["cached_tokens"], g["completion_tokens"], g["turns"],
            _usd(g["cost_usd"]), f"{g['gated']}/{g['prechecked']}/{g['capped']}", g["ok_token"],
        ]

    scope = f"agent {report['agent']}" if report["agent"] else "every agent"
    out = [f"costs of {scope} since {report['since'].isoformat()}, by {report['by']}"]
    groups = [cells(g["key"], g) for g in report["groups"]]
    out += render.table(head, [*groups, cells("total", report["total"])], right=frozenset({1, 3, 4, 5, 6, 7, 9}))
    for cap in report["daily_cap"]:
        spent = _usd(cap["spent_today_usd"])
        if cap["cap_usd"] is None:
            out.append(f"daily cap of {cap['agent_id']}: none (spent today {spent})")
        else:
            out.append(f"daily cap of {cap['agent_id']}: {_usd(cap['cap_usd'])}, spent today {spent}, headroom {_usd(cap['headroom_usd'])}")
    return out


@click.command("costs")
@app.agent_option()
@click.option("--by", "by", type=click.Choice([b.value for b in costs.By]), default=costs.By.day.value, show_default=True, help="Group by.")
@click.option("--since", "since_text", default=DEFAULT_SINCE, show_default=True, help=f"From when: {SINCE_HELP}.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@app.pass_ctx
def costs_cmd(ctx: app.Context, agent_id: str | None, by: str, since_text: str, as_json: bool) -> None:
    """What the wakes cost, from the ledger: tokens, turns and cost per day, tier or agent, the
    wakes by outcome (silent ones too), those that made no model call, and the daily caps' headroom."""
    config = ctx.config
    now = clock.now()
    try:
        zones = _zones(config, agent_id)
        zone = zones[agent_id] if agent_id else "UTC"
        since = parse_since(since_text, now, zone)
    except InvalidInput as exc:
        app.fail(exc)

    async def body() -> tuple[list[costs.Group], list[costs.Spent]]:
        async with app.ledger_conn(config) as conn:
            groups = await costs.totals(conn, zones=zones, since=since, agent_id=agent_id, by=costs.By(by))
            return groups, await costs.spent_today(conn, zones=zones, now=now)

    groups, spent = app.run_async(body)
    report = {
        "agent": agent_id, "by": by, "since": since, "groups": [dict(rows.fields(g)) for g in groups], "total": total(groups),
        "daily_cap": headroom(config, spent),
    }
    click.echo(render.to_json(report) if as_json else "\n".join(lines(report)))
