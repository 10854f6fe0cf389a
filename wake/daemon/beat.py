"""The daemon's heartbeat (`wake.daemon.control`): what this replica is doing, published every
`heartbeat_s`; sharing agents, the membership read with it and this replica's share taken
(`wake.daemon.ownership`); and, stopping, the beat that says it leaves."""

from __future__ import annotations

import asyncio
import os
import socket
import time

from wake import __version__, logs
from wake.daemon import control, ownership
from wake.daemon.running import Host

log = logs.get("wake.daemon")


def state(daemon: Host) -> control.ReplicaState:
    return control.ReplicaState(
        replica_id=daemon.replica_id, host=socket.gethostname(), pid=os.getpid(), version=__version__,
        started_at=daemon.started_at, heartbeat_at=daemon.now(), running=list(daemon.running.values()), next_fires=daemon.next_fires(),
        owned=daemon.owned_count(), leaving=daemon.stopping, down=daemon.supervisor.down_view(),
    )


async def loop(daemon: Host) -> None:
    while True:  # at a fixed rate: a slow Redis must not stretch the beats past the heartbeat's TTL
        began = time.monotonic()
        await beat(daemon)
        if daemon.notifier.enabled:
            daemon.notifier.status(daemon.status_text())
        await asyncio.sleep(max(0.0, daemon.config.daemon.heartbeat_s - (time.monotonic() - began)))


async def beat(daemon: Host) -> None:
    """Publish the heartbeat, then (sharing agents) read the membership and take this
    replica's share of it (`wake.daemon.ownership`). A heartbeat that could not be published
    for a whole TTL first drops every agent: the others may have taken them."""
    redis, own = daemon.live.session.stores.redis, daemon.ownership
    if daemon.shared and own.owned and not own.fresh():
        daemon._apply(own.lapse())
    at = time.monotonic()
    try:
        await control.heartbeat(redis, daemon.state(), ttl_s=own.ttl_s)
    except Exception as exc:  # Redis away: the replica just looks dead to `wake status` meanwhile
        log.warning("daemon.heartbeat_failed", error=logs.redact_text(str(exc)))
        return
    own.beat(at)
    if not daemon.shared or daemon.stopping:
        return
    try:
        members, left = await ownership.read_membership(redis, own.members)
        if not own.assigned:  # read before this replica's own mark could be there
            own.resumed = await ownership.cluster_resumed(redis, daemon.replica_id)
    except Exception as exc:  # keep the share it has; the heartbeat's TTL bounds how long
        log.warning("ownership.read_failed", error=logs.redact_text(str(exc)))
        return
    before = own.members
    daemon._apply(own.update(members, daemon.config.agents, left))
    if own.members != before:
        log.info("ownership.members", members=list(own.members), owned=len(own.owned))
    try:
        await ownership.mark_member(redis, daemon.replica_id)
    except Exception as exc:  # the next beat writes it again
        log.warning("ownership.mark_failed", error=logs.redact_text(str(exc)))


async def leave(daemon: Host) -> None:
    """Stopping: say so in the heartbeat (the others drop this replica from the membership at
    their next beat and take its agents while it drains) and leave a mark that it was on purpose."""
    daemon._apply(daemon.ownership.leave())
    try:
        await asyncio.wait_for(_leaving_beat(daemon), timeout=max(1.0, daemon.config.daemon.heartbeat_s))
    except Exception as exc:  # Redis away: the others take over when the heartbeat expires
        log.warning("ownership.leave_failed", error=logs.redact_text(f"{type(exc).__name__}: {exc}"))


async def _leaving_beat(daemon: Host) -> None:
    redis, own = daemon.live.session.stores.redis, daemon.ownership
    await ownership.mark_left(redis, daemon.replica_id, 2 * own.ttl_s)
    if not [m for m in own.members if m != daemon.replica_id]:  # the last member: the cluster stops on purpose
        await ownership.forget_cluster(redis, daemon.replica_id)
    await control.heartbeat(redis, daemon.state(), ttl_s=own.ttl_s)
