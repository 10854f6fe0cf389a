"""The built-in tools. Each declares its surfaces here and nowhere else."""

from __future__ import annotations

import zoneinfo

from ledgers import introspection
from surfaces.context import ToolContext
from surfaces.registry import Tool, tool

_EMPTY: dict[str, object] = {"type": "object", "properties": {}, "additionalProperties": False}


@tool(
    name="local_time",
    description="The current date and time in the agent's own timezone.",
    parameters=_EMPTY,
    surfaces={"chat", "wake"},
)
async def local_time(ctx: ToolContext) -> dict[str, object]:
    local = ctx.now.astimezone(zoneinfo.ZoneInfo(ctx.timezone))
    return {"local": local.isoformat(timespec="seconds"), "timezone": ctx.timezone, "weekday": local.strftime("%A")}


@tool(
    name="wake_history",
    description="The agent's most recent wakes from the introspection ledger: tier, trigger, status, tools held.",
    parameters={
        "type": "object",
        "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}},
        "additionalProperties": False,
    },
    surfaces={"chat", "wake.surface"},
)
async def wake_history(ctx: ToolContext, limit: int = 10) -> list[dict[str, object]]:
    async with ctx.read() as conn:
        rows = await introspection.recent(conn, agent_id=ctx.agent_id, limit=limit)
    return [
        {
            "wake_id": str(r.wake_id), "tier": r.tier, "trigger": r.trigger, "status": r.status,
            "started_at": r.started_at.isoformat(), "tools": r.active_tools_count,
        }
        for r in rows
    ]


@tool(
    name="wake_manifest",
    description="This wake's own witness record: manifest root, the tools bound and the state of each arrival block.",
    parameters=_EMPTY,
    surfaces={"wake"},
)
async def wake_manifest(ctx: ToolContext) -> dict[str, object]:
    async with ctx.read() as conn:
        row = await introspection.get(conn, ctx.wake_id)
    if row is None:
        return {"error": "this wake has no ledger row (dry run?)"}
    return {
        "manifest_root": row.manifest_root,
        "tools": row.active_tool_names,
        "blocks": {name: {k: b[k] for k in ("retrieval", "result")} for name, b in row.blocks.items()},
    }


TOOLS: tuple[Tool, ...] = (local_time, wake_history, wake_manifest)
