"""The operator's view of running daemons: `wake trigger` and `wake status`, and the console's
trigger action and agent page (one client of the protocol for both).

Both talk to Redis only (never PostgreSQL): they read the replicas' heartbeats and the agents'
lease keys, and `trigger` speaks the request/events protocol of `wake.control`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from ledgers.vocab import GOOD
from wake import clock, stores
from wake.config import Config
from wake.daemon import control, rendezvous, schedule
from wake.errors import NoDaemon
from wake.stores import lease

# sysexits: a wait that ran out (EX_TEMPFAIL).
EXIT_TIMED_OUT = 75


@contextlib.asynccontextmanager
async def redis_client(config: Config) -> AsyncIterator[tuple[aioredis.Redis, str]]:
    """The configured Redis (the embedded one when none is configured) and its printable address."""
    url, _embedded = await stores.resolve_redis_url(config)
    client = await stores.open_redis(config, url)
    try:
        yield client, stores.address(url)
    finally:
        await client.aclose()


# -- wake trigger -------------------------------------------------------------------------------


@dataclass(kw_only=True)
class TriggerResult:
    """What became of one trigger request. `outcome`: settled | started | refused | timeout."""

    request_id: str
    agent: str
    tier: str
    outcome: str = "timeout"
    wake_id: str | None = None
    status: str | None = None
    note: str | None = None
    error: str | None = None
    reason: str | None = None
    withdrawn: bool = False
    events: list[dict[str, object]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.outcome == "settled":
            return 0 if self.status in GOOD else 1
        if self.outcome == "started":  # --no-wait
            return 0
        if self.outcome == "refused":
            return 1
        return EXIT_TIMED_OUT

    def as_dict(self) -> dict[str, object]:
        return {
            "request_id": self.request_id, "agent": self.agent, "tier": self.tier, "outcome": self.outcome,
            "wake_id": self.wake_id, "status": self.status, "note": self.note, "error": self.error,
            "reason": self.reason, "withdrawn": self.withdrawn, "events": self.events,
        }


async def trigger(
    config: Config, agent: str, tier: str, *, wait: bool, timeout_s: float,
    on_started: Callable[[TriggerResult], None] | None = None,
) -> TriggerResult:
    """Ask a running daemon for a manual wake of (agent, tier) and follow it.

    Raises `NoDaemon` (leaving no request behind) when no replica is alive. With `wait=False` it
    returns once the wake has started. If no daemon took the request before `timeout_s`, or the
    caller is interrupted first, the request is withdrawn so it cannot run later unobserved.
    """
    async with redis_client(config) as (redis, address):
        if not await control.live_replicas(redis):
            raise NoDaemon(address)
        request = await control.request_wake(redis, agent, tier, clock.now())
        result = TriggerResult(request_id=request.request_id, agent=agent, tier=tier)
        try:
            async for event in control.events(redis, request.request_id, timeout_s):
                result.events.append(event)
                kind = event.get("event")
                if kind == "started":
                    result.outcome, result.wake_id = "started", str(event.get("wake_id"))
                    if on_started is not None:
                        on_started(result)
                    if not wait:
                        break
                elif kind == "settled":
                    result.outcome = "settled"
                    result.wake_id = str(event.get("wake_id") or result.wake_id)
                    result.status, result.note, result.error = event.get("status"), event.get("note"), event.get("error")
                elif kind == "refused":
                    result.outcome, result.reason = "refused", event.get("reason")
            if result.outcome == "started" and wait:
                result.outcome = "timeout"  # started, but did not settle in time
        finally:
            if not result.events:
                result.withdrawn = await control.withdraw(redis, request)
        return result


# -- wake status --------------------------------------------------------------------------------


async def _leases(redis: aioredis.Redis, agents: Sequence[str]) -> list[dict[str, Any]]:
    """Each configured agent's lease: holder token, TTL left, and the fence counter."""
    async with redis.pipeline(transaction=False) as pipe:
        for agent in agents:
            key = lease.LEASE_KEY.format(agent=agent)
            pipe.get(key)
            pipe.pttl(key)
            pipe.get(lease.FENCE_KEY.format(agent=agent))
        replies = await pipe.execute()
    rows = []
    for i, agent in enumerate(agents):
        holder, pttl_ms, fence = replies[3 * i : 3 * i + 3]
        rows.append({
            "agent": agent,
            "held": holder is not None,
            "holder": holder,
            "ttl_s": round(pttl_ms / 1000, 1) if holder is not None and pttl_ms >= 0 else None,
            # While the lease is held, the counter is its holder's fence (both are set in one call).
            "fence": int(fence) if fence is not None else None,
        })
    return rows


def _next_fires(config: Config, replicas: Sequence[control.ReplicaState]) -> list[dict[str, object]]:
    """The earliest next fire per configured (agent, tier) across the live replicas."""
    earliest: dict[tuple[str, str], str] = {}
    for replica in replicas:
        for fire in replica.next_fires:
            key = (str(fire.get("agent")), str(fire.get("tier")))
            try:
                at = dt.datetime.fromisoformat(str(fire.get("at")))
            except ValueError:
                continue  # a replica that cannot say when is not scheduling it
            if key not in earliest or at < dt.datetime.fromisoformat(earliest[key]):
                earliest[key] = at.isoformat()
    return [
        {"agent": agent, "tier": tier, "at": at, "next_active": _next_active(config, agent, tier, at)}
        for agent, conf in config.agents.items() for tier in conf.tiers for at in [earliest.get((agent, tier))]
    ]


def _next_active(config: Config, agent: str, tier: str, at: str | None) -> str | None:
    """The first fire from `at` on inside the tier's active hours (`at` itself without active
    hours): the next wake that will run, not be recorded skipped."""
    if at is None:
        return None
    sched = schedule.from_config(config, agent, tier)
    if not sched.active:
        return at
    fire = dt.datetime.fromisoformat(at)
    slot = schedule.fire_at_or_before(sched, fire) or fire  # the slot the fire belongs to (it fires at slot + jitter)
    found = schedule.next_active_fire(sched, slot - dt.timedelta(microseconds=1))
    if found is None:
        return None
    return (found + dt.timedelta(seconds=schedule.jitter_delay_s(sched, found))).astimezone(dt.UTC).isoformat()


async def status(config: Config, now: dt.datetime | None = None) -> dict[str, Any]:
    """Live replicas, wakes running now, leases held, next fire times, queued trigger requests."""
    now = now or clock.now()
    async with redis_client(config) as (redis, address):
        replicas = await control.live_replicas(redis)
        leases = await _leases(redis, list(config.agents))
        pending = await control.pending_requests(redis)
    # Every replica computes the same owners from the same heartbeats (wake.daemon.rendezvous): so does status.
    shared = config.daemon.ownership == "rendezvous"
    owners = rendezvous.assign(config.agents, rendezvous.members_of(replicas)) if shared else {}
    for row in leases:
        row["owner"] = owners.get(row["agent"]) if shared else ("every replica" if replicas else None)
    return {
        "at": now.isoformat(),
        "redis": address,
        "daemon_alive": bool(replicas),
        "replicas": [
            {
                "replica_id": r.replica_id, "host": r.host, "pid": r.pid, "version": r.version,
                "started_at": r.started_at.isoformat(), "heartbeat_at": r.heartbeat_at.isoformat(),
                "heartbeat_age_s": round((now - r.heartbeat_at).total_seconds(), 1),
                "owned": r.owned, "leaving": r.leaving, "down": r.down,
            }
            for r in replicas
        ],
        "running": [{**w, "replica_id": r.replica_id} for r in replicas for w in r.running],
        "leases": leases,
        "next_fires": _next_fires(config, replicas) if replicas else [],
        "pending_requests": pending,
    }
