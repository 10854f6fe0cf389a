"""The one tool of a test module loaded for what its import does (a tool module must declare a
tool): a marker that takes nothing and does nothing."""

from __future__ import annotations

from typing import Any

from surfaces.registry import Tool


async def _noop(ctx: Any) -> dict[str, str]:
    return {}


def marker(name: str, module: str) -> Tool:
    """The tool `name`, saying that the `module` test module is loaded."""
    return Tool(
        name=name, description=f"Marks that the {module} test module is loaded.",
        parameters={"type": "object", "properties": {}}, version="1", handler=_noop, mutates=False, surfaces=frozenset({"chat"}),
    )
