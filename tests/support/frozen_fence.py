"""A tools module for the frozen-replica test (loaded through `tools.modules`): every wake's think
step opens the wake's fenced transaction (`ctx.harness_write()`, which locks the agent's fence row
FOR SHARE; `last_actions` is the control plane, which the harness's login writes), writes a
`last_actions` row in it, logs `test.fenced`, and holds the transaction open until the test's
barrier file exists (`WAKE_TEST_RELEASE`, as in `tests.support.slow_think`), so that the test can
SIGSTOP the process inside it. The row commits only if the transaction survives;
`test.fenced_write_lost` says it did not."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import asyncpg

from ledgers.fences import StaleFence
from tests.support import markers
from wake import logs
from wake.run import cycle

log = logs.get("tests.frozen_fence")
_think = cycle.think


async def _held() -> None:
    release = os.environ["WAKE_TEST_RELEASE"]
    deadline = time.monotonic() + 600  # the test releases it long before this
    while not os.path.exists(release) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def _fenced_think(ctx: Any, blocks: Any, models: Any) -> Any:
    try:
        async with ctx.harness_write() as conn:  # last_actions: the harness's record (control plane)
            await markers.record_action(conn, ctx, "frozen_fence", "held the fence")
            log.info("test.fenced", wake_id=str(ctx.wake_id), fence=ctx.fence)
            await _held()
        log.info("test.fenced_write_committed", wake_id=str(ctx.wake_id), fence=ctx.fence)
    except (StaleFence, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        log.warning("test.fenced_write_lost", wake_id=str(ctx.wake_id), fence=ctx.fence, error=type(exc).__name__)
    return await _think(ctx, blocks, models)


cycle.think = _fenced_think


TOOLS = [markers.marker("frozen_fence_marker", "frozen-fence")]
