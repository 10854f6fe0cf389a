"""The daemon's incident watch: every `[daemon] incident_watch_s` (30 s by default) it reads each
configured tier's newest settled row into `wake_last_settled_timestamp_seconds`, runs the dead-man
check over them (`wake.daemon.deadman`: an overdue tier's incident opened), and reads the open
incidents per agent into `wake_open_incidents` (docs/incidents.md, docs/metrics.md).

A side task of the daemon's `Companion` shape (`name`, `async __call__(daemon)`, returning once
`daemon.stop` is set), reading only `daemon.stores`, `daemon.config`, `daemon.now`,
`daemon.metrics` and `daemon.stop`, as `wake.daemon.anchoring` does. Every replica runs it; the
incidents' writer makes the dead-man incident one whoever notices. A failed round (PostgreSQL
away) is logged and tried at the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledgers import incidents, introspection
from wake import clock, logs
from wake.config import Config
from wake.daemon import deadman
from wake.observe import metrics

log = logs.get("wake.daemon.incident_watch")

INTERVAL_S = 30.0  # `[daemon] incident_watch_s`'s default


async def refresh(
    st: Any, m: metrics.Metrics | None, config: Config | None = None, *, now: dt.datetime | None = None,
    first_seen: dict[tuple[str, str], dt.datetime] | None = None,
) -> dict[str, int]:
    """One round: with a config, each tier's newest settled row into the gauge and the dead-man
    check; then the open incidents per agent, into the gauge when there are metrics."""
    async with st.pg_conn() as conn:
        if config is not None:
            at = now or clock.now()
            pairs = [(a, t) for a, agent in config.agents.items() for t in agent.tiers]
            lasts = await introspection.last_settled(conn, pairs)
            if m is not None:
                m.set_last_settled({k: v.finished_at for k, v in lasts.items() if v.finished_at is not None})
            await deadman.check(conn, config, lasts, at, first_seen if first_seen is not None else {})
        counts = await incidents.open_counts(conn)
    if m is not None:
        m.set_open_incidents(counts)
    return counts


async def run(stores_of: Callable[[], object], metrics_of: Callable[[], metrics.Metrics | None], stop: asyncio.Event,
              interval_s: float | Callable[[], float] = INTERVAL_S, config_of: Callable[[], Config | None] = lambda: None,
              now: Callable[[], dt.datetime] = clock.now) -> None:
    first_seen: dict[tuple[str, str], dt.datetime] = {}
    while not stop.is_set():
        st = stores_of()
        try:
            if st is not None:
                await refresh(st, metrics_of(), config_of(), now=now(), first_seen=first_seen)
        except Exception as exc:  # PostgreSQL away: the next round may succeed
            log.warning("incidents.watch_failed", error=f"{type(exc).__name__}: {str(exc)[:300]}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s() if callable(interval_s) else interval_s)


@dataclass
class IncidentWatch:
    """The daemon's side task (the daemon's `Companion` shape)."""

    name: str = field(default="incident-watch")

    async def __call__(self, daemon: Any) -> None:
        await run(lambda: daemon.stores, lambda: daemon.metrics, daemon.stop, interval_s=lambda: daemon.config.daemon.incident_watch_s,
                  config_of=lambda: daemon.config, now=lambda: daemon.now())


def companion() -> IncidentWatch:
    return IncidentWatch()
