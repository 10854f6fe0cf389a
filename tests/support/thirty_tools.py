"""A registry of 30 operator tools for the capability-map tests (loaded through tools.modules)."""

from __future__ import annotations

from typing import Any

from surfaces.registry import Tool

_PARAMS: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False}


async def _echo(ctx: Any, q: str = "") -> dict[str, str]:
    return {"echo": q}


def _tool(name: str, surfaces: set[str], mutates: bool = False) -> Tool:
    return Tool(
        name=name, description=f"Test tool {name}.", parameters=_PARAMS, version="1", handler=_echo, mutates=mutates, surfaces=frozenset(surfaces),
    )


# 10 chat-only, 5 whisper, 5 surface, 5 full, 4 every-wake, 1 on a surface no tier binds.
TOOLS: list[Tool] = (
    [_tool(f"chat_{i:02d}", {"chat"}) for i in range(10)]
    + [_tool(f"whisper_{i:02d}", {"wake.whisper", "chat"}) for i in range(5)]
    + [_tool(f"surface_{i:02d}", {"wake.surface"}, mutates=i % 2 == 0) for i in range(5)]
    + [_tool(f"full_{i:02d}", {"wake.full"}, mutates=True) for i in range(5)]
    + [_tool(f"anywake_{i:02d}", {"wake"}) for i in range(4)]
    + [_tool("ops_report", {"ops"})]
)
