"""How straight one daemon-fired whisper's path is, from its fire to its settle (issue 37): the
files it stays in, the returns to a file already left, the climbs back up a layer, counted by
`tests.support.path_trace` over a real in-process daemon. `-s` prints the figures."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from ledgers import introspection
from tests.support import daemons, path_trace, sessions
from wake import clock
from wake.config import Config
from wake.daemon import schedule

DAEMON = "[daemon]\nlease_ttl_s = 5\nheartbeat_s = 0.2\n"
# Everything below the wake cycle's entry is the cycle's own steps (docs/design.md, 4-10).
CYCLE = ("wake/run/cycle.py:run_wake",)


async def test_one_whisper_from_fire_to_settle(store_config: Callable[..., Config]) -> None:
    async with sessions.ready_session(store_config(DAEMON)) as s:
        d, st = daemons.in_process(s), s.stores
        whisper = d.schedules[("demo", "whisper")]
        slot = schedule.fire_at_or_before(whisper, clock.now() - dt.timedelta(minutes=1))
        assert slot is not None
        with path_trace.traced("run_slot") as roots:
            await d.run_slot(whisper, slot, "schedule")
        async with st.pg_conn() as conn:
            rows = await introspection.recent(conn, limit=5)
    assert [(r.tier, r.status) for r in rows] == [("whisper", "completed")]
    whole = path_trace.Path.of(roots)
    steps = path_trace.Path.of(roots, fold=CYCLE)
    print("\nwhole:", whole.figures(), "\nfire to settle, the cycle folded:", steps.figures())
    print(" -> ".join(steps.stays))
    print("entered:", {f: n for f, n in steps.entries.items() if n > 1})
    print("\n".join(path_trace.outline(roots, CYCLE)))
    for caller, callee in steps.climbs:
        print("climb:", caller, "->", callee)
    assert steps.stays[0] == "wake/daemon/service.py" and "wake/run/cycle.py" in steps.stays
    assert steps.climbs == []  # no callback from below into the daemon
    assert steps.entries["wake/run/claim.py"] <= 2  # the claim and lease, then the wake: each entered once
