"""Tools for the replay tests: one that writes a file (mutating), one that only reads (counted).
`RAN` records every handler that ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from surfaces.registry import Tool, tool

RAN: list[tuple[str, dict[str, Any]]] = []


@tool(
    name="file_write", description="Write text to a file.", mutates=True, surfaces={"wake"},
    parameters={"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                "required": ["path", "text"], "additionalProperties": False},
)
async def file_write(ctx: Any, path: str, text: str) -> dict[str, Any]:
    RAN.append(("file_write", {"path": path, "text": text}))
    Path(path).write_text(text, encoding="utf-8")
    return {"written": len(text)}


@tool(
    name="peek", description="Read a counter (reads only).", surfaces={"wake"},
    parameters={"type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"], "additionalProperties": False},
)
async def peek(ctx: Any, what: str) -> dict[str, Any]:
    RAN.append(("peek", {"what": what}))
    return {"what": what, "value": 7}


TOOLS: tuple[Tool, ...] = (file_write, peek)
