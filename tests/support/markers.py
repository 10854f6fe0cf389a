"""What the test modules loaded for what their import does share: their one tool (a tool module
must declare one), a marker that takes nothing and does nothing; and the `last_actions` row those
that hold a wake in its think step write as a mutating tool would (`record_action`)."""

from __future__ import annotations

from typing import Any

import asyncpg

from ledgers import actions
from surfaces.registry import Tool
from wake import clock


async def _noop(ctx: Any) -> dict[str, str]:
    return {}


def marker(name: str, module: str) -> Tool:
    """The tool `name`, saying that the `module` test module is loaded."""
    return Tool(
        name=name, description=f"Marks that the {module} test module is loaded.",
        parameters={"type": "object", "properties": {}}, version="1", handler=_noop, mutates=False, surfaces=frozenset({"chat"}),
    )


async def record_action(conn: asyncpg.Connection, ctx: Any, tool: str, summary: str) -> None:
    """The wake's `last_actions` row for `tool`, under its fence, on the harness's connection."""
    await actions.record(
        conn, agent_id=ctx.agent_id, surface=f"wake.{ctx.tier}", tool=tool, summary=summary,
        arguments={}, wake_id=ctx.wake_id, fence=ctx.fence, acted_at=clock.now(),
    )
