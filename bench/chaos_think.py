"""A tools module for bench/chaos.py (loaded through `tools.modules`): each wake's think step,
without a model, takes `WAKE_CHAOS_THINK_S` seconds (so faults find wakes in flight), makes one
fenced write (a `last_actions` row, as the model loop records a mutating call, on the harness's
login; a stale fence refuses it) and ends
with a final text, so the wake writes its daybook entry and queues its delivery under its fence."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ledgers import actions
from ledgers.errors import StaleFence
from surfaces.registry import Registry, Tool
from wake import clock, logs
from wake.run import cycle
from wake.think import loop as thinking_loop

log = logs.get("bench.chaos_think")


async def _think(ctx: Any, blocks: Any, models: Any) -> thinking_loop.Thought:
    await asyncio.sleep(float(os.environ.get("WAKE_CHAOS_THINK_S", "0.5")))
    try:
        async with ctx.harness_write() as conn:  # last_actions: the harness's record (control plane)
            await actions.record(
                conn, agent_id=ctx.agent_id, surface=f"wake.{ctx.tier}", tool="chaos_think", summary="acted under the fence",
                arguments={}, wake_id=ctx.wake_id, fence=ctx.fence, acted_at=clock.now(),
            )
    except StaleFence as exc:
        log.warning("chaos.action_refused", wake_id=str(ctx.wake_id), fence=ctx.fence, newest=exc.newest)
        raise
    return thinking_loop.Thought(status="completed", note="bench.chaos_think", error=None, thinking=None, final_text=f"chaos wake {ctx.wake_id}")


cycle.think = _think


async def _noop(ctx: Any) -> dict[str, str]:
    return {}


def register(registry: Registry) -> None:
    registry.register(Tool(
        name="chaos_think_marker", description="Marks that the chaos think module is loaded.",
        parameters={"type": "object", "properties": {}}, version="1", handler=_noop, mutates=False, surfaces=frozenset({"chat"}),
    ))
