"""`wake status`'s view with each store's health: PostgreSQL and Redis, reachable or not."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import ledgers.controls
from wake import clock
from wake.cli import controls
from wake.config import Config
from wake.daemon import remote, schedule
from wake.errors import StoreUnavailable


async def status_with_stores(config: Config) -> dict[str, Any]:
    """`status`, the operator controls (`controls.snapshot`), and each store's health: `stores`
    is [{store, ok, detail}] for PostgreSQL and Redis. A store that is down is said, and the rest
    shown as far as it can be (no Redis: no replicas, leases or next fires)."""
    now = clock.now()
    health = []
    try:
        result = await remote.status(config, now)
        health.append({"store": "redis", "ok": True, "detail": result["redis"]})
    except StoreUnavailable as exc:
        result = {"at": now.isoformat(), "redis": exc.address, "daemon_alive": False, "replicas": [], "running": [], "leases": [],
                  "next_fires": [], "pending_requests": 0}
        health.append({"store": "redis", "ok": False, "detail": str(exc)})
    result.update(await controls.snapshot(config, now))
    if not result["daemon_alive"]:  # no daemon to ask: the same schedule, computed from the config (as the console does)
        result["next_fires"] = [dict(f, source="config") for f in config_fires(config, now)]
    result["next_fires"] = [mark_paused(f, result.get("pauses") or []) for f in result["next_fires"]]
    error = result.get("controls_error")
    health.insert(0, {"store": "postgres", "ok": error is None, "detail": error or "reachable"})
    result["stores"] = health
    return result


def config_fires(config: Config, now: dt.datetime) -> list[dict[str, Any]]:
    """Each agent's and tier's next fire after `now`, from its schedule in the config."""
    out = []
    for agent_id, agent in config.agents.items():
        for tier in agent.tiers:
            at = schedule.next_fire(schedule.from_config(config, agent_id, tier), now)
            out.append({"agent": agent_id, "tier": tier, "at": at.isoformat() if at else None})
    return out


def mark_paused(fire: dict[str, Any], pauses: Sequence[ledgers.controls.Pause]) -> dict[str, object]:
    """A fire a pause in force covers (its agent, its tier or all, until after the fire) is marked
    `skipped: paused`: the slot will be claimed and recorded skipped, not run."""
    at = dt.datetime.fromisoformat(fire["at"]) if fire.get("at") else None
    for p in pauses:
        if p.agent_id == fire["agent"] and p.tier in (ledgers.controls.ALL_TIERS, fire["tier"]) and (p.until is None or at is None or p.until > at):
            return dict(fire, skipped=f"paused by {p.paused_by}")
    return fire
