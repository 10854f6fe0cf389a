"""A tools module for the side-task tests (loaded through `tools.modules`): with
`WAKE_TEST_FAILING_TASK=<name>[,<name>...]` the daemon's side tasks of those names raise every
time they start, so the supervisor's restarts and the `down` it shows can be watched in a real
daemon process."""

from __future__ import annotations

import os
from typing import Any

from tests.support import markers
from wake.console import serve
from wake.daemon import anchoring, inbox, outbox, service, spool

BODIES: dict[str, tuple[Any, str]] = {
    "outbox": (outbox.Sender, "loop"),
    "oneshots": (service.Daemon, "_oneshot_loop"),
    "triggers": (service.Daemon, "_trigger_loop"),
    "heartbeat": (service.Daemon, "_heartbeat_loop"),
    "spool": (spool.Spool, "loop"),
    "inbox": (inbox.Endpoint, "serve"),
    "console": (serve.Runner, "__call__"),
    "anchoring": (anchoring.Anchoring, "__call__"),
}


def _failing(name: str) -> Any:
    async def fails(*args: Any, **kw: Any) -> None:
        raise RuntimeError(f"test: the {name} side task fails")

    return fails


for name in os.environ.get("WAKE_TEST_FAILING_TASK", "").split(","):
    if name in BODIES:
        owner, attribute = BODIES[name]
        setattr(owner, attribute, _failing(name))


# A marker tool (a module must declare one); importing this module is the point.
TOOLS = [markers.marker("failing_side_task_marker", "failing-side-task")]
