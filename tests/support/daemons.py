"""Shared scaffolding for tests of the daemon and the wake path: a daemon in this process over a
test's ready session (`tests.support.sessions`), ready for `run_slot`, `run_manual` and friends
(not `run`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from tests.support.sessions import ready_session
from wake.config import Config
from wake.daemon import notify, schedule
from wake.daemon import service as daemon
from wake.run import session


def in_process(s: session.Session, **kw: Any) -> daemon.Daemon:
    """A daemon over `s`, with its schedules, no signal handlers and no systemd notifier."""
    d = daemon.Daemon(config=s.config, notifier=notify.Notifier(None), handle_signals=False, **kw)
    d.open(s)
    d.schedules = {(sc.agent_id, sc.tier): sc for sc in schedule.all_schedules(s.config)}
    return d


@contextlib.asynccontextmanager
async def factory(config: Config) -> AsyncIterator[Callable[..., daemon.Daemon]]:
    """Daemons sharing one ready session over this test's stores (`in_process`'s keywords on each)."""
    async with ready_session(config) as s:
        yield lambda **kw: in_process(s, **kw)
