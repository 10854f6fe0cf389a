"""`wake status`'s view with each store's health: PostgreSQL and Redis, reachable or not."""

from __future__ import annotations

from typing import Any

from wake import clock
from wake.cli import controls
from wake.config import Config
from wake.daemon import remote
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
    error = result.get("controls_error")
    health.insert(0, {"store": "postgres", "ok": error is None, "detail": error or "reachable"})
    result["stores"] = health
    return result
