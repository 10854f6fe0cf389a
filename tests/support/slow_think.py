"""A tools module for the daemon's acceptance tests (loaded through `tools.modules`).

It stands in for a slow model loop without a model server: every wake's think step (after the
row is recorded `started`) is held open until the test releases it, so a test can catch a wake in
flight however slow the machine is, and then makes one fenced write, a `last_actions` row, the
way a mutating tool would. The write is attempted even when the wake is cancelled (a process
resuming after SIGSTOP): a stale fence must refuse it.

The barrier is a file: with `WAKE_TEST_RELEASE` set, a wake thinks until that path exists (the
test creates it; every later wake passes at once). Without it, `WAKE_TEST_THINK_S` seconds.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from ledgers.errors import StaleFence
from tests.support import markers
from wake import logs
from wake.run import cycle

log = logs.get("tests.slow_think")
_think = cycle.think


async def _write_action(ctx: Any) -> None:
    try:
        async with ctx.harness_write() as conn:  # last_actions: the harness's record (control plane)
            await markers.record_action(conn, ctx, "slow_think", "thought slowly")
        log.info("test.action_written", wake_id=str(ctx.wake_id), fence=ctx.fence)
    except StaleFence as exc:
        log.warning("test.action_refused", wake_id=str(ctx.wake_id), fence=ctx.fence, newest=exc.newest)


async def _held() -> None:
    release = os.environ.get("WAKE_TEST_RELEASE")
    if not release:
        await asyncio.sleep(float(os.environ.get("WAKE_TEST_THINK_S", "0")))
        return
    deadline = time.monotonic() + 600  # the test that holds it releases it long before this
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{release} did not appear within 600 s")
        await asyncio.sleep(0.05)


async def _slow_think(ctx: Any, blocks: Any, models: Any) -> Any:
    try:
        await _held()
    finally:
        await asyncio.shield(_write_action(ctx))
    return await _think(ctx, blocks, models)


cycle.think = _slow_think


TOOLS = [markers.marker("slow_think_marker", "slow-think")]
