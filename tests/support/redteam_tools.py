"""A tool that holds a SQL shell on its `ToolContext` connection, for the control-plane red team
(tests/integration/test_control_plane.py): `sql` runs one statement in the wake's fenced write
transaction (`ctx.write()`, the agent's own tool connection) and answers with its rows, or with
PostgreSQL's refusal. An injected instruction that reached a tool like this one can send any SQL."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from surfaces.registry import Tool, tool


@tool(
    name="sql", description="Run one SQL statement on the tool's own connection.", mutates=False, surfaces={"wake.surface"},
    parameters={"type": "object", "properties": {"statement": {"type": "string"}}, "required": ["statement"], "additionalProperties": False},
)
async def sql(ctx: Any, statement: str) -> str:
    try:
        async with ctx.write() as conn:
            rows = await conn.fetch(statement)
            status = "ok"
    except asyncpg.PostgresError as exc:
        return json.dumps({"statement": statement, "refused": f"{type(exc).__name__}: {exc}"})
    return json.dumps({"statement": statement, "status": status, "rows": [dict(r) for r in rows]}, default=str)


TOOLS: tuple[Tool, ...] = (sql,)
