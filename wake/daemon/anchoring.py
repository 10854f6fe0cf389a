"""The daemon's anchoring: every `[anchor] interval_s` (a day by default) each agent's chain head
is timestamped at the configured authority (`wake.witness.anchor.anchor_heads`), as
`wake verify --chain --anchor` does by hand (docs/ledger.md, "Anchored chain heads").

The hook is `companion(config)`: None unless `[anchor] daemon = true`, else a side task of the
`Companion` shape the daemon already runs (`name`, `async __call__(daemon)`, returning once
`daemon.stop` is set), reading only `daemon.config`, `daemon.stores` and `daemon.stop`. The loop
itself (`run`) takes those three as arguments, so it does not depend on the daemon's internals.

The schedule is kept in the table: an anchor is due when the newest stored one (of any agent) is
`interval_s` old, so a restart does not anchor again and replicas mostly do not both ask (when they
do, the second anchor of a link is not stored). A failed attempt (the authority down, PostgreSQL
away) is logged and tried again after `RETRY_S`, never more often than the interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledgers import chain_anchors
from wake import clock, logs
from wake.config import Config
from wake.witness import anchor

log = logs.get("wake.daemon.anchoring")

RETRY_S = 300.0  # after a failed attempt: the authority or PostgreSQL may be back in five minutes


async def due_in_s(conn: Any, interval_s: float, now: dt.datetime) -> float:
    """Seconds until the next anchor is due (0: now)."""
    newest = await chain_anchors.newest(conn)
    if newest is None:
        return 0.0
    return max(0.0, interval_s - (now - newest).total_seconds())


async def run(config: Config, stores_of: Callable[[], Any], stop: asyncio.Event, *, now: Callable[[], dt.datetime] = clock.now,
              anchored: Callable[[list[anchor.Anchored]], None] | None = None) -> None:
    """Anchor every agent's head whenever one is due, until `stop` is set. `stores_of()` gives the
    daemon's open stores (None while they are not open); `anchored` is told each round's result."""
    conf = config.anchor
    if conf.tsa_url is None or conf.ca_file is None:
        return
    trusted = anchor.roots(config.config_relative(conf.ca_file))
    while not stop.is_set():
        wait_s = RETRY_S
        st = stores_of()
        try:
            if st is not None:
                async with st.pg_conn() as conn:
                    wait_s = await due_in_s(conn, conf.interval_s, now())
                    found = await anchor.heads(conn) if wait_s == 0.0 else []
                if wait_s == 0.0:  # the authority is asked with no pooled connection held
                    tokens = await anchor.obtain(found, conf.tsa_url, trusted, timeout_s=conf.timeout_s)
                    async with st.pg_conn() as conn:
                        done = await anchor.store(conn, tokens, conf.tsa_url, now())
                    log.info("wake.chain_anchored", heads=[(a.agent_id, a.chain_seq) for a in done])
                    wait_s = float(conf.interval_s)
                    if anchored is not None:
                        anchored(done)
        except Exception as exc:  # the authority, PostgreSQL: the next attempt may succeed
            log.warning("wake.chain_anchor_failed", error=f"{type(exc).__name__}: {str(exc)[:300]}")
            wait_s = min(RETRY_S, float(conf.interval_s))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)


@dataclass
class Anchoring:
    """The daemon's side task (the daemon's `Companion` shape)."""

    config: Config
    name: str = field(default="anchoring")

    async def __call__(self, daemon: Any) -> None:
        await run(self.config, lambda: daemon.stores, daemon.stop, now=daemon.now)


def companion(config: Config) -> Anchoring | None:
    """The side task when `[anchor] daemon = true`; None otherwise."""
    return Anchoring(config) if config.anchor.daemon else None
