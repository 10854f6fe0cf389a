"""A tool whose result fills the context window: each call returns `SIZE` characters."""

from __future__ import annotations

from typing import Any

from surfaces.registry import Tool, tool

SIZE = 2400


@tool(
    name="bulk", description="Returns a large block of text.", surfaces={"wake"},
    parameters={"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"], "additionalProperties": False},
)
async def bulk(ctx: Any, n: int) -> str:
    return f"result {n}: " + "lorem ipsum " * (SIZE // 12)


TOOLS: tuple[Tool, ...] = (bulk,)
