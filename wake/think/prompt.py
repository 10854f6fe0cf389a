"""The messages of a wake, ordered for provider prompt caches.

The request body is `model`, then `tools` (the binding, sorted by name), then the messages:
a system message (the harness preamble, then the `static` and `stable` blocks) and a user
message (the `session` and `volatile` blocks, those whose source declares `changes_every_wake`
last and, among those, the ones that move with the clock on every wake (`moves_with_clock`: the
clock, the recent wakes) after the ones that move only when something happened (the daybook after
a wake that thought, the binding diff, the same from wake to wake on a regular schedule); then the
instruction). Everything that changes often comes last, so consecutive wakes of a tier share a
byte-identical prefix and a provider's prompt cache serves it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from surfaces.registry import Tool
from untrusted import spotlight
from wake.arrival import engine
from wake.arrival.engine import Block, CacheTier, prompt_order

PREAMBLE = (
    "You are a long-lived agent, woken on a schedule by the wake harness; no human prompted this wake.\n"
    "The harness assembled the context below before your first token. Each block says what it is; "
    "a block reading \"could not check: ...\" means the harness could not look, not that there is nothing.\n"
    "You may call only the tools offered in this request; a call to any other tool is refused and recorded.\n"
    "When you are done, answer without a tool call: that text is your daybook entry for this wake."
)
INSTRUCTION = "Act on what needs acting on, then write your daybook entry for this wake."
SUMMARY = (
    "This wake's budget is spent ({reason}). Call no tools. Write your daybook entry for this wake now: "
    "what you saw, what you did, what is still open."
)


def messages(blocks: Sequence[Block], marks: spotlight.Marks) -> list[dict[str, Any]]:
    """The system and user messages; the system message names the wake's marks (`untrusted.spotlight`)."""
    ordered = prompt_order(blocks)  # the moving part: every-wake blocks after the rest, clock-bound ones last
    settled = [b for b in ordered if b.cache_tier <= CacheTier.stable]
    moving = [b for b in ordered if b.cache_tier > CacheTier.stable]
    system = PREAMBLE + "\n" + marks.system_note() + ("\n\n" + engine.render(settled) if settled else "")
    user = (engine.render(moving) + "\n\n" if moving else "") + INSTRUCTION
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def tool_spec(tool: Tool) -> dict[str, Any]:
    """The OpenAI function declaration of one bound tool."""
    return {"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)}}


def summary_request(reason: str) -> dict[str, object]:
    return {"role": "user", "content": SUMMARY.format(reason=reason)}


def shared_prefix_share(a: bytes, b: bytes) -> float:
    """The common prefix of two request bodies as a share of the longer one."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n / longest


def body_bytes(body: dict[str, object]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")
