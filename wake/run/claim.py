"""A wake under its agent's lease (DESIGN step 3), the same for `wake daemon` and `wake up`.

Taking the lease makes this caller the agent's only live writer, so it is also the moment to close
what a dead holder left behind: every row of the agent still `started` belongs to a process whose
lease is gone (it died, or lost the lease and can no longer write past the fence), and is closed
`abandoned` under the new fence.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from typing import Any

from ledgers import introspection
from wake import logs
from wake.run import cycle
from wake.stores import lease
from wake.config import Config
from wake.errors import WakeError
from wake.stores import Stores

log = logs.get("wake.leased")

ABANDONED = "abandoned: its process died or lost the agent's lease before settling"


class AgentBusy(WakeError):
    """Another wake of the agent holds its lease (sysexits EX_TEMPFAIL: try again later)."""

    exit_code = 75


class LeaseLost(WakeError):
    """The wake lost its lease and was cancelled."""

    exit_code = 75


def owner() -> str:
    """The readable prefix of lease tokens this process takes: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def close_abandoned(stores: Stores, agent_id: str, fence: int) -> list[dict[str, Any]]:
    """Close the agent's rows left `started`; the caller holds the lease with `fence`."""
    async with lease.fenced(stores, agent_id, fence) as conn:
        closed = await introspection.abandon_started(conn, agent_id, ABANDONED)
    for row in closed:
        log.warning("wake.abandoned", agent=agent_id, wake_id=str(row["wake_id"]), host=row["host"], pid=row["pid"], fence=row["fence"], closed_by_fence=fence)
    return closed


@contextlib.asynccontextmanager
async def agent_lease(
    config: Config, stores: Stores, agent_id: str, *, owner: str, guarded: asyncio.Task[Any] | None = None, wait_s: float = 0.0,
) -> AsyncIterator[lease.Lease]:
    """Hold the agent's lease (TTL `daemon.lease_ttl_s`, renewed every TTL/3; losing it cancels
    `guarded`), with the agent's abandoned rows closed. Raises `lease.LeaseBusy` after `wait_s`."""
    ttl_ms = int(config.daemon.lease_ttl_s * 1000)
    async with lease.held(stores, agent_id, ttl_ms=ttl_ms, owner=owner, guarded=guarded, wait_s=wait_s) as held:
        await close_abandoned(stores, agent_id, held.fence)
        yield held


async def run_manual(config: Config, stores: Stores, registry: Any, agent_id: str, tier: str, *, models: Any = None) -> Any:
    """`wake up`: one manual wake in this process, under the agent's lease like every daemon wake,
    so the two never overlap. Raises `AgentBusy` when another wake holds the lease, `LeaseLost`
    when this one lost it (the wake was cancelled and settled `aborted` if it still could)."""
    task = asyncio.current_task()
    try:
        async with agent_lease(config, stores, agent_id, owner=owner(), guarded=task) as held:
            try:
                return await cycle.run_wake(config=config, stores=stores, registry=registry, agent_id=agent_id, tier=tier, fence=held.fence, models=models)
            except asyncio.CancelledError:
                if held.lost.is_set() and task is not None and task.uncancel() == 0:
                    raise LeaseLost(f"the wake of agent {agent_id!r} lost its lease (fence {held.fence}) and was cancelled") from None
                raise
    except lease.LeaseBusy as busy:
        raise AgentBusy(
            f"{busy}; try again when it has settled"
        ) from None
