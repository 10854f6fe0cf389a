"""Toxic flows at a wake: the binding's triangle of untrusted input, private data and egress
(docs/tools.md, "Toxic flows").

`vet` is step 5's flow part, run on the binding after the MCP pins: under `refuse` a tier whose
binding holds all three labels does not bind its egress tools (unless an operator accepted that
flow at that tier), under `warn` it binds them; both record a finding, once per flow while open.
It also compares the flow with the one the tier's last wake held, so the binding diff can say
when a change created or removed one, naming the tools.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg

from ledgers import tool_flows
from surfaces import flow_labels
from wake import logs

if TYPE_CHECKING:  # only the binding's type: a ledger read (wake.witness.diff) must not load the registry
    from surfaces.registry import Tool

log = logs.get("wake.witness.flows")

POLICIES = ("refuse", "warn", "off")


Change = tool_flows.Change  # defined beside `Held`, so that a wake's context (below this step) can carry one


@dataclass(frozen=True, kw_only=True)
class Vetted:
    binding: list[Tool]
    held: tool_flows.Held  # the flow the binding as computed holds (before any refusal)
    policy: str
    accepted: bool = False
    refused: tuple[str, ...] = ()  # the egress tools left unbound
    finding_id: int | None = None
    change: Change = Change()


async def vet(
    conn: asyncpg.Connection, agent_id: str, tier: str, binding: Sequence[Tool], policy: str, at: dt.datetime, *, record: bool = True,
    read: tool_flows.TierFlows | None = None,
) -> Vetted:
    """The binding after the tier's flow policy, with the flow it holds and how that changed.
    `record=False` (a dry run) writes nothing. `read`: the tier's flows read already (with the
    wake's other reads), so not read again."""
    held = flow_labels.triangle(binding)
    tier_flows = read if read is not None else await tool_flows.tier_flows(conn, agent_id, tier)
    previous = tier_flows.last
    change = _change(previous, held)
    if record and (previous or tool_flows.Held(flow_id=None)) != held:  # written when it changed: a quiet whisper only reads
        await tool_flows.save_state(conn, agent_id, tier, held)
    if held.flow_id is None or policy == "off":
        return Vetted(binding=list(binding), held=held, policy=policy, change=change)
    accepted = held.flow_id in tier_flows.accepted
    finding = await tool_flows.raise_finding(conn, agent_id, tier, held, policy, at) if record and not accepted else None
    if finding is not None:
        log.warning("wake.toxic_flow", agent=agent_id, tier=tier, flow=held.flow_id, policy=policy, finding=finding,
                    untrusted=held.untrusted, private=held.private, egress=held.egress)
    refused = held.egress if policy == "refuse" and not accepted else ()
    return Vetted(binding=[t for t in binding if t.name not in refused], held=held, policy=policy, accepted=accepted, refused=refused,
                  finding_id=finding, change=change)


def _change(previous: tool_flows.Held | None, held: tool_flows.Held) -> Change:
    before = previous.flow_id if previous is not None else None
    if before == held.flow_id:
        return Change()
    return Change(created=held if held.flow_id is not None else None, removed=previous if before is not None else None)


def block_lines(v: Vetted) -> list[str]:
    """What the `tools` block says of the flow (nothing when there is none, or the policy is off)."""
    if v.held.flow_id is None or v.policy == "off":
        return []
    what = f"- toxic flow {v.held.flow_id}: this binding holds {flow_labels.legs_text(v.held)}"
    if v.refused:
        return [f"{what}; {', '.join(v.refused)} not bound (tools.toxic_flows = refuse) until an operator accepts the flow"]
    if v.accepted:
        return [f"{what}; bound (accepted by an operator)"]
    return [f"{what}; bound anyway (tools.toxic_flows = warn)"]


def diff_lines(change: Change) -> list[str]:
    """What the binding diff says of a flow that a change created or removed."""
    lines = []
    if change.created is not None:
        lines.append(f"- new toxic flow {change.created.flow_id}: {flow_labels.legs_text(change.created)}")
    if change.removed is not None:
        lines.append(f"- toxic flow {change.removed.flow_id} gone: {flow_labels.legs_text(change.removed)}")
    return lines
