"""A few small tools for the live tool-call tests (surface `live`; `pin_note`, which mutates, on
`live_write`): a tiny model given the whole wake binding writes arguments it cannot close, and the
whole binding's declarations do not fit its 8,192-token window, so these tests offer it a short
list like the one the whisper tier had when they were written. Their strings are short (maxLength,
which llama.cpp's grammar enforces), so a call the grammar forces always closes well inside a
turn's token limit."""

from __future__ import annotations

from typing import Any

from surfaces.context import ToolContext
from surfaces.registry import Tool, tool


@tool(
    name="local_clock",
    description="The current local time of the wake, in the agent's zone.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    surfaces={"live"},
)
async def local_clock(ctx: ToolContext) -> dict[str, Any]:
    return {"now": ctx.now.isoformat(), "timezone": ctx.timezone}


@tool(
    name="jot",
    description="Write a short note for later.",
    parameters={"type": "object", "properties": {"text": {"type": "string", "maxLength": 40}}, "required": ["text"],
                "additionalProperties": False},
    surfaces={"live"},
)
async def jot(ctx: ToolContext, text: str) -> dict[str, Any]:
    return {"noted": len(text)}


@tool(
    name="manifest_root",
    description="This wake's manifest: its id and the time it started.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    surfaces={"live"},
)
async def manifest_root(ctx: ToolContext) -> dict[str, Any]:
    return {"wake_id": str(ctx.wake_id), "started": ctx.now.isoformat()}


TOOLS: list[Tool] = [local_clock, jot, manifest_root]


@tool(
    name="pin_note",
    description="Pin a short note to the agent's board (it stays until unpinned).",
    parameters={"type": "object", "properties": {"text": {"type": "string", "maxLength": 40}}, "required": ["text"],
                "additionalProperties": False},
    mutates=True,
    surfaces={"live_write"},
)
async def pin_note(ctx: ToolContext, text: str) -> dict[str, Any]:
    return {"pinned": text}


TOOLS.append(pin_note)
