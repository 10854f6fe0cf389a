"""What an operator may do from the console, each through the code path of its CLI command and
recorded with who did it exactly as that command records it (docs/console.md):

| action | CLI | records |
|---|---|---|
| ack | `wake memory ack ID --by WHO` | the finding `acknowledged`, `acked_by`, note |
| revert | `wake memory revert --finding ID --by WHO` | the revert commit (author WHO), its memory write, the finding `reverted` |
| pause | `wake pause AGENT --by WHO` | the `wake_pauses` row, `paused_by` |
| resume | `wake resume AGENT` | the pause lifted |
| trigger | `wake trigger --no-wait` | a manual wake (its row, trigger `manual`) |
| approve, reject | `wake approvals --agent AGENT approve ID --by WHO` (or `reject`), `--why` from the note | the decision, `decided_by`, its seal |
| accept | `wake tools accept SERVER/TOOL --by WHO` (or `accept-flow`) | the finding accepted, by whom (`BY_KIND`: one writer per kind) |
| ack-incident | `wake incidents ack ID --by WHO` | the incident's `acked_by` and `acked_at` (the same writer, scoped to the page's agent) |

Every action is also logged (`console.action`, with who and from where). Bad input is one
`InvalidInput` line and changes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from ledgers import controls, memory_ledger, tool_flows, tool_pins
from ledgers.vocab import Tier
from wake import logs
from wake.config import Config
from wake.daemon import commands, remote
from wake.errors import InvalidInput, NotFound
from wake.run import incident_policy

log = logs.get("wake.console")

WHO_MAX = 100  # characters of a `by`
NOTE_MAX = 500
TRIGGER_START_S = 30.0  # how long a trigger waits for a daemon to start the wake


@dataclass(frozen=True)
class Done:
    """What an action did, in one line; and the wake it started, if any."""

    message: str
    wake_id: str | None = None


def who(text: str | None) -> str:
    value = (text or "").strip()
    if not value:
        raise InvalidInput("say who you are (the `by` field): it is recorded with the action, as the CLI's --by is")
    if len(value) > WHO_MAX:
        raise InvalidInput(f"`by` is {len(value)} characters; at most {WHO_MAX}")
    return value


def note(text: str | None) -> str | None:
    value = (text or "").strip() or None
    if value is not None and len(value) > NOTE_MAX:
        raise InvalidInput(f"the note is {len(value)} characters; at most {NOTE_MAX}")
    return value


def _tier(config: Config, agent_id: str, tier: str | None) -> str | None:
    if agent_id not in config.agents:
        raise NotFound(f"no agent {agent_id[:60]!r} is configured")
    if tier is None or tier == "":
        return None
    if tier not in config.agents[agent_id].tiers:
        raise InvalidInput(f"agent {agent_id!r} has no {tier[:20]!r} tier; configured: {', '.join(config.agents[agent_id].tiers)}")
    return tier


def _halt_line(halted: bool) -> str:
    return "a HALT is still open: the agent's wakes stay halted" if halted else "no HALT is open: the agent's next wake thinks"


async def ack(conn: asyncpg.Connection, agent_id: str, finding_id: int, *, by: str, why: str | None, at: dt.datetime) -> Done:
    with commands.refused():
        done = await memory_ledger.ack(conn, agent_id, [finding_id], by=by, note=why, at=at)
    if not done:
        raise InvalidInput(f"finding #{finding_id} is not open (unknown, or already acted on)")
    return Done(f"acknowledged #{finding_id} (by {by}); {_halt_line(await memory_ledger.has_open_halt(conn, agent_id))}")


async def ack_incident(conn: asyncpg.Connection, agent_id: str, incident: str | None, *, by: str, at: dt.datetime) -> Done:
    """`wake incidents ack ID --by WHO` from the agent's page: its writer, with the id checked to be
    this agent's (another agent's incident is NotFound, as an unknown one is, and changes nothing)."""
    number = incident_policy.incident_number(incident)
    await incident_policy.acknowledge(conn, number, incident_policy.acker(by), at, agent_id=agent_id)
    return Done(f"acknowledged incident {number} (by {by}); it stays open until a success of its tier closes it")


async def revert(
    conn: asyncpg.Connection, config: Config, agent_id: str, finding_id: int, *, by: str, why: str | None, at: dt.datetime,
) -> Done:
    repo = commands.open_repo(config, agent_id, at)
    with commands.refused():
        done, _record = await memory_ledger.revert_finding(conn, repo, agent_id, finding_id, by=by, note=why, at=at)
    return Done(f"{done}; finding #{finding_id} reverted (by {by}); {_halt_line(await memory_ledger.has_open_halt(conn, agent_id))}")


async def pause(
    conn: asyncpg.Connection, config: Config, agent_id: str, *, tier: str | None, until_text: str | None, reason: str | None,
    by: str, at: dt.datetime,
) -> Done:
    scope = _tier(config, agent_id, tier)
    until = commands.parse_when(until_text, at, config.agents[agent_id].timezone) if until_text and until_text.strip() else None
    if until is not None and until <= at:
        raise InvalidInput(f"until {until_text!r} is {until.isoformat()}, which has passed")
    await controls.pause(conn, agent_id=agent_id, tier=scope, paused_by=by, paused_at=at, until=until, reason=reason)
    return Done(f"paused {agent_id}/{scope or 'all tiers'} by {by}" + (f" until {until.isoformat()}" if until else " until resumed"))


async def resume(conn: asyncpg.Connection, config: Config, agent_id: str, *, tier: str | None) -> Done:
    scope = _tier(config, agent_id, tier)
    lifted = await controls.resume(conn, agent_id, scope)
    if not lifted:
        return Done(f"{agent_id}/{scope or 'all tiers'} was not paused; nothing changed")
    return Done("; ".join(f"resumed {p.agent_id}/{p.tier} (paused by {p.paused_by})" for p in lifted))


async def trigger(config: Config, agent_id: str, tier: str | None) -> Done:
    """A manual wake through the running daemon, as `wake trigger --no-wait` asks for it."""
    scope = _tier(config, agent_id, tier or Tier.whisper.value)
    assert scope is not None
    result = await remote.trigger(config, agent_id, scope, wait=False, timeout_s=TRIGGER_START_S)
    if result.outcome == "refused":
        raise InvalidInput(f"the daemon refused the request: {result.reason}")
    if result.outcome != "started":
        withdrawn = " (the request was withdrawn: it will not run)" if result.withdrawn else ""
        raise InvalidInput(f"no wake started within {TRIGGER_START_S:g}s{withdrawn}")
    return Done(f"wake {result.wake_id} of {agent_id}/{scope} started", wake_id=result.wake_id)


async def decide(
    conn: asyncpg.Connection, config: Config, agent_id: str, approval_id: int, decision: str, *, by: str, why: str | None, at: dt.datetime,
) -> Done:
    """`wake approvals --agent AGENT approve|reject ID --by WHO`, from the agent's page: the same
    writer (`commands.decide_approval`), scoped to the page's agent, so another agent's approval
    is refused and changes nothing."""
    done = await commands.decide_approval(conn, config, approval_id, decision, by=by, why=why, at=at, agent_id=agent_id)
    then = f"it runs at {agent_id}'s next wake that holds {done.tool}" if decision == "approved" else "it will not run"
    return Done(f"{decision} approval {done.id}: {done.tool} (by {by}); {then}")


# -- accepting a finding: a tool pin, a toxic flow ---------------------------------------------------

Acceptor = Callable[[asyncpg.Connection, Config, str, str, str, str | None, dt.datetime], Awaitable[str]]


def _pair(finding: str, shape: str) -> tuple[str, str]:
    """A finding's two parts, `A/B` as `shape` names them; a part missing is refused, naming the shape."""
    first, _, second = finding.partition("/")
    if not first or not second:
        raise InvalidInput(f"expected {shape}, got {finding[:80]!r}")
    return first, second


async def _accept_tool_pin(
    conn: asyncpg.Connection, config: Config, agent_id: str, finding: str, by: str, why: str | None, at: dt.datetime,
) -> str:
    """`wake tools accept SERVER/TOOL --by NAME`, from the console: the same ledger call."""
    server, tool = _pair(finding, "SERVER/TOOL")
    done = await tool_pins.accept(conn, server, tool, by=by, at=at)
    if done is None:
        raise NotFound(f"no open finding for {finding[:80]} (see `wake tools findings`)")
    log.info("console.tool_pin_accepted", server=server, tool=tool, by=by, finding_id=done.id)
    return f"accepted finding {done.id}: {server}/{tool} pinned {done.seen_hash[:16]} (was {done.pinned_hash[:16]}), by {by}"


async def _accept_toxic_flow(
    conn: asyncpg.Connection, config: Config, agent_id: str, finding: str, by: str, why: str | None, at: dt.datetime,
) -> str:
    """`wake tools accept-flow AGENT.TIER FLOW_ID --by NAME`, from the agent's page: the same ledger call."""
    tier, flow_id = _pair(finding, "TIER/FLOW_ID")
    done = await tool_flows.accept(conn, agent_id, tier, flow_id, by=by, at=at)
    if done is None:
        raise NotFound(f"no open toxic flow {finding[:80]} of {agent_id} (see `wake tools findings`)")
    log.info("console.toxic_flow_accepted", agent=agent_id, tier=tier, flow=flow_id, by=by, finding_id=done.id)
    return f"accepted toxic flow {flow_id} at {agent_id}.{tier}, by {by}"


BY_KIND: dict[str, Acceptor] = {"tool_pin": _accept_tool_pin, "toxic_flow": _accept_toxic_flow}


async def accept(
    conn: asyncpg.Connection, config: Config, agent_id: str, kind: str, finding: str, *, by: str, why: str | None, at: dt.datetime,
) -> Done:
    acceptor = BY_KIND.get(kind)
    if acceptor is None:
        raise NotFound(f"nothing of kind {kind[:40]!r} can be accepted here (known: {', '.join(sorted(BY_KIND))})")
    return Done(await acceptor(conn, config, agent_id, finding, by, why, at))
