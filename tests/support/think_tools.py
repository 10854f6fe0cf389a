"""Tools for the model-loop tests: one that mutates, one that fails, one that hangs, one too
chatty, one bound to no wake. `CALLS` records every handler that ran."""

from __future__ import annotations

import asyncio
from typing import Any

from surfaces.registry import Tool, tool

CALLS: list[tuple[str, dict[str, Any]]] = []
_NONE: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


@tool(
    name="note_write", description="Write a note.", mutates=True, surfaces={"wake"},
    parameters={"type": "object", "properties": {"text": {"type": "string", "minLength": 1}}, "required": ["text"], "additionalProperties": False},
)
async def note_write(ctx: Any, text: str) -> dict[str, Any]:
    CALLS.append(("note_write", {"text": text}))
    return {"written": text}


@tool(name="explode", description="Always fails.", parameters=_NONE, surfaces={"wake"})
async def explode(ctx: Any) -> None:
    CALLS.append(("explode", {}))
    raise RuntimeError("kaboom")


@tool(name="sleepy", description="Takes too long.", parameters=_NONE, surfaces={"wake"})
async def sleepy(ctx: Any) -> str:
    CALLS.append(("sleepy", {}))
    await asyncio.sleep(30)
    return "woke"


@tool(name="chatty", description="Returns a lot.", parameters=_NONE, surfaces={"wake"})
async def chatty(ctx: Any) -> str:
    CALLS.append(("chatty", {}))
    return "x" * 1000


@tool(name="chat_only", description="Only for the chat surface.", parameters=_NONE, surfaces={"chat"})
async def chat_only(ctx: Any) -> str:
    CALLS.append(("chat_only", {}))
    return "should never run in a wake"


TOOLS: tuple[Tool, ...] = (note_write, explode, sleepy, chatty, chat_only)
