"""Step 7, the gate: before a whisper calls the model, decide whether there is anything to think about.

- **Escalate**: a rule of `[[gate.escalate]]` holds; the whisper ends without a model call and a
  wake of the rule's tier (default `surface`) runs at once with trigger `escalation` and the
  rule's cause. Rules: `present` (the block's result is present), `changed` (its hash differs
  from the previous whisper's and its result is present: a new human message), `newly_failing`
  (the block, or any block, failed now and did not at the previous whisper).
- **Quiet**: the previous whisper settled `completed` or `quiet`; the tools are unchanged; every
  `session` and `volatile` block has the hash it had then; and no block of `gate.due_blocks` is
  present. The whisper ends `quiet`: no model call, 0 tokens.
- **Open**: anything else; the model loop runs.

Blocks whose source declares `changes_every_wake` (the clock, the list of recent wakes, the
binding diff's wording) differ on every wake by construction and are not compared: a change in
what they stand for shows up elsewhere (the tool hashes, another block's hash or state).
Only whispers are gated; surface and full wakes always think.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledgers.introspection import BlockStates, Compared, Diff
from ledgers.vocab import GOOD
from wake.arrival.engine import Block, CacheTier
from wake.config import EscalationRule, GateConfig

GATED_TIER = "whisper"
COMPARED_TIERS = (CacheTier.session, CacheTier.volatile)


@dataclass(frozen=True, kw_only=True)
class Decision:
    action: str  # open | quiet | escalate
    reason: str
    to: str | None = None


def _hash_of(blocks: BlockStates, name: str) -> str | None:
    state = blocks.get(name)
    return None if state is None else state.get("hash")


def _rule_cause(
    rule: EscalationRule, blocks: Mapping[str, Block], hashes: Mapping[str, str], previous: Compared | None, tier_diff: Diff | None
) -> str | None:
    if rule.when == "newly_failing":
        failing = () if tier_diff is None or tier_diff.first else tier_diff.blocks.newly_failing
        hit = [n for n in failing if rule.block is None or n == rule.block]
        return f"newly failing: {', '.join(hit)}" if hit else None
    block = blocks.get(rule.block or "")
    if block is None or block.result != "present":
        return None
    if rule.when == "present":
        return f"{block.name} present"
    old = _hash_of(previous.blocks, block.name) if previous is not None else None
    return f"{block.name} changed" if old is None or old != hashes.get(block.name) else None


def decide(
    *, tier: str, blocks: Sequence[Block], hashes: Mapping[str, str], previous_tier: Compared | None,
    tier_diff: Diff | None, config: GateConfig,
) -> Decision:
    """The gate's verdict for one wake. `hashes` are the manifest's block hashes; `previous_tier` is
    the previous settled wake of this tier; `tier_diff` the binding diff against it."""
    if tier != GATED_TIER:
        return Decision(action="open", reason=f"{tier} wakes are not gated")
    by_name = {b.name: b for b in blocks}
    for rule in config.escalate:
        cause = _rule_cause(rule, by_name, hashes, previous_tier, tier_diff)
        if cause is not None:
            return Decision(action="escalate", reason=cause, to=rule.to)
    if previous_tier is None or tier_diff is None or tier_diff.first:
        return Decision(action="open", reason="first whisper")
    if previous_tier.status not in GOOD:
        return Decision(action="open", reason=f"previous whisper ended {previous_tier.status}")
    if tier_diff.tools.any:
        return Decision(action="open", reason="tools changed")
    if tier_diff.blocks.removed:
        return Decision(action="open", reason=f"blocks gone: {', '.join(tier_diff.blocks.removed)}")
    changed = [
        b.name for b in blocks
        if b.cache_tier in COMPARED_TIERS and not b.changes_every_wake and _hash_of(previous_tier.blocks, b.name) != hashes.get(b.name)
    ]
    if changed:
        return Decision(action="open", reason=f"changed: {', '.join(changed)}")
    due = [b.name for b in blocks if b.name in config.due_blocks and b.result == "present"]
    if due:
        return Decision(action="open", reason=f"due: {', '.join(due)}")
    return Decision(action="quiet", reason=f"nothing changed since whisper {str(previous_tier.wake_id)[:8]}, nothing due")
