"""The binding diff: what changed in a wake's hands and arrival since an earlier wake.

Computed against the agent's previous settled wake and against the previous wake of the same
tier; stored on the ledger row and rendered as the "since your last wake" block, so the agent is
told when its hands changed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ledgers.vocab import Retrieval
from wake import clock

DIFF_BLOCK = "binding_diff"


def compare(previous: Mapping[str, Any] | None, tool_hashes: Mapping[str, str], blocks: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Diff of tools (by declaration hash) and blocks (by text hash and state) against one earlier row."""
    if previous is None:
        return {"first": True, "against": None}
    old_tools: Mapping[str, str] = previous["tool_hashes"] or {}
    old_blocks: Mapping[str, Mapping[str, Any]] = {k: v for k, v in (previous["blocks"] or {}).items() if k != DIFF_BLOCK}
    new_blocks = {k: v for k, v in blocks.items() if k != DIFF_BLOCK}
    block_diff: dict[str, list[str]] = {"changed": [], "unchanged": [], "newly_failing": [], "recovered": [], "added": [], "removed": []}
    for name, block in sorted(new_blocks.items()):
        old = old_blocks.get(name)
        if old is None:
            block_diff["added"].append(name)
            continue
        failing_now, failing_then = block["retrieval"] == Retrieval.failed, old["retrieval"] == Retrieval.failed
        if failing_now and not failing_then:
            block_diff["newly_failing"].append(name)
        elif failing_then and not failing_now:
            block_diff["recovered"].append(name)
        block_diff["changed" if block["hash"] != old["hash"] else "unchanged"].append(name)
    block_diff["removed"] = sorted(set(old_blocks) - set(new_blocks))
    return {
        "first": False,
        "against": {"wake_id": str(previous["wake_id"]), "tier": previous["tier"], "started_at": previous["started_at"].isoformat()},
        "tools": {
            "added": sorted(set(tool_hashes) - set(old_tools)),
            "removed": sorted(set(old_tools) - set(tool_hashes)),
            "changed": sorted(n for n in set(tool_hashes) & set(old_tools) if tool_hashes[n] != old_tools[n]),
            "held": len(tool_hashes),
        },
        "blocks": block_diff,
    }


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


def _lines(d: Mapping[str, Any]) -> list[str]:
    tools, blocks = d["tools"], d["blocks"]
    parts = [f"{k} {', '.join(tools[k])}" for k in ("added", "removed", "changed") if tools[k]]
    lines = [f"- tools: {'; '.join(parts)} (now holding {tools['held']})" if parts else f"- tools: unchanged ({tools['held']} held)"]
    for key, label in (
        ("newly_failing", "newly failing"),
        ("recovered", "recovered"),
        ("changed", "blocks changed"),
        ("added", "blocks new"),
        ("removed", "blocks gone"),
    ):
        if blocks[key]:
            lines.append(f"- {label}: {', '.join(blocks[key])}")
    return lines


def render(agent_diff: Mapping[str, Any], tier_diff: Mapping[str, Any], tier: str, timezone: str, now: dt.datetime) -> str:
    if agent_diff["first"]:
        return "This is your first wake. There is nothing earlier to compare with."
    against = agent_diff["against"]
    out = [f"Since your last wake ({against['tier']}, {_when(against['started_at'], timezone, now)}):", *_lines(agent_diff)]
    if tier_diff["first"]:
        out.append(f"This is your first {tier} wake.")
    elif tier_diff["against"]["wake_id"] != against["wake_id"]:
        out.append(f"Since your last {tier} wake ({_when(tier_diff['against']['started_at'], timezone, now)}):")
        out.extend(_lines(tier_diff))
    return "\n".join(out)
