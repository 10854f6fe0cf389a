"""Tools for the approval tests: `deploy` declares `requires_approval` and takes a `reason`;
`restart` declares nothing (a config marks it) and has no reason argument; `status` needs no
approval. `CALLS` records every handler that ran, with the wake and fence it ran under."""

from __future__ import annotations

from typing import Any

from surfaces.registry import Tool, tool

CALLS: list[dict[str, Any]] = []


@tool(
    name="deploy", description="Deploy a release to a target.", mutates=True, surfaces={"wake.surface"}, requires_approval=True,
    parameters={
        "type": "object",
        "properties": {"target": {"type": "string", "minLength": 1}, "reason": {"type": "string"}},
        "required": ["target"], "additionalProperties": False,
    },
)
async def deploy(ctx: Any, target: str, reason: str = "") -> dict[str, Any]:
    CALLS.append({"tool": "deploy", "target": target, "wake_id": ctx.wake_id, "fence": ctx.fence})
    return {"deployed": target}


@tool(
    name="restart", description="Restart a service.", mutates=True, surfaces={"wake.surface"},
    parameters={"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"], "additionalProperties": False},
)
async def restart(ctx: Any, service: str) -> str:
    CALLS.append({"tool": "restart", "service": service, "wake_id": ctx.wake_id, "fence": ctx.fence})
    return f"restarted {service}"


@tool(name="status", description="Say how things are.", surfaces={"wake"}, parameters={"type": "object", "properties": {}})
async def status(ctx: Any) -> str:
    CALLS.append({"tool": "status", "wake_id": ctx.wake_id, "fence": ctx.fence})
    return "all green"


TOOLS: tuple[Tool, ...] = (deploy, restart, status)
