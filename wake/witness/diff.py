"""The binding diff: what changed in a wake's hands and arrival since an earlier wake.

Computed against the agent's previous settled wake and against the previous wake of the same
tier; stored on the ledger row and rendered as the "since your last wake" block, so the agent is
told when its hands changed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from ledgers.introspection import Against, BlockDiff, BlockStates, Compared, Diff, ToolDiff, WakeDiff
from ledgers.vocab import Retrieval
from wake import clock
from wake.witness import flows

DIFF_BLOCK = "binding_diff"


def compare(previous: Compared | None, tool_hashes: Mapping[str, str], blocks: BlockStates) -> Diff:
    """Diff of tools (by declaration hash) and blocks (by text hash and state) against one earlier row."""
    if previous is None:
        return Diff()
    old_tools = previous.tool_hashes
    old_blocks = {k: v for k, v in previous.blocks.items() if k != DIFF_BLOCK}
    new_blocks = {k: v for k, v in blocks.items() if k != DIFF_BLOCK}
    found: dict[str, list[str]] = {kind: [] for kind in BlockDiff.KINDS}
    for name, block in sorted(new_blocks.items()):
        old = old_blocks.get(name)
        if old is None:
            found["added"].append(name)
            continue
        failing_now, failing_then = block["retrieval"] == Retrieval.failed, old["retrieval"] == Retrieval.failed
        if failing_now and not failing_then:
            found["newly_failing"].append(name)
        elif failing_then and not failing_now:
            found["recovered"].append(name)
        found["changed" if block["hash"] != old["hash"] else "unchanged"].append(name)
    found["removed"] = sorted(set(old_blocks) - set(new_blocks))
    return Diff(
        against=Against(wake_id=str(previous.wake_id), tier=previous.tier, started_at=previous.started_at.isoformat()),
        tools=ToolDiff(
            added=tuple(sorted(set(tool_hashes) - set(old_tools))),
            removed=tuple(sorted(set(old_tools) - set(tool_hashes))),
            changed=tuple(sorted(n for n in set(tool_hashes) & set(old_tools) if tool_hashes[n] != old_tools[n])),
            held=len(tool_hashes),
        ),
        blocks=BlockDiff(**{kind: tuple(names) for kind, names in found.items()}),
    )


def both(previous_agent: Compared | None, previous_tier: Compared | None, tool_hashes: Mapping[str, str], blocks: BlockStates) -> WakeDiff:
    """Step 5's diff: against the agent's previous wake and against the tier's."""
    return WakeDiff(agent=compare(previous_agent, tool_hashes, blocks), tier=compare(previous_tier, tool_hashes, blocks))


def _when(iso: str, timezone: str, now: dt.datetime) -> str:
    """How long ago an earlier wake started. Under two hours "N min ago" is exact to the minute, so
    the time itself (which moves on every wake, while the gap of a regular schedule does not) is
    left out; beyond that the gap is rounded to hours or days and the time is given too."""
    at = dt.datetime.fromisoformat(iso)
    minutes = int((now - at).total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min ago"
    ago = f"{minutes // 60} h ago" if minutes < 2880 else f"{minutes // 1440} days ago"
    return f"{clock.stamp(at, timezone)}, {ago}"


def _lines(d: Diff) -> list[str]:
    tools, blocks = d.tools, d.blocks
    parts = [f"{k} {', '.join(names)}" for k, names in (("added", tools.added), ("removed", tools.removed), ("changed", tools.changed)) if names]
    lines = [f"- tools: {'; '.join(parts)} (now holding {tools.held})" if parts else f"- tools: unchanged ({tools.held} held)"]
    for names, label in (
        (blocks.newly_failing, "newly failing"),
        (blocks.recovered, "recovered"),
        (blocks.changed, "blocks changed"),
        (blocks.added, "blocks new"),
        (blocks.removed, "blocks gone"),
    ):
        if names:
            lines.append(f"- {label}: {', '.join(names)}")
    return lines


def render(wake_diff: WakeDiff, tier: str, timezone: str, now: dt.datetime, flow: flows.Change | None = None) -> str:
    """`flow`: how the tier's toxic flow changed since its last wake (`wake.witness.flows`), said under the agent's diff."""
    agent_diff, tier_diff = wake_diff.agent, wake_diff.tier
    flow_lines = flows.diff_lines(flow) if flow is not None else []
    if agent_diff.against is None:
        return "\n".join(["This is your first wake. There is nothing earlier to compare with.", *flow_lines])
    against = agent_diff.against
    out = [f"Since your last wake ({against.tier}, {_when(against.started_at, timezone, now)}):", *_lines(agent_diff), *flow_lines]
    if tier_diff.against is None:
        out.append(f"This is your first {tier} wake.")
    elif tier_diff.against.wake_id != against.wake_id:
        out.append(f"Since your last {tier} wake ({_when(tier_diff.against.started_at, timezone, now)}):")
        out.extend(_lines(tier_diff))
    return "\n".join(out)

