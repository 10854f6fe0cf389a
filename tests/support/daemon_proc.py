"""`wake daemon` as a process for the acceptance tests, and a one-shot SQL query against a test database."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg

from tests.support import cli_fork

REPO = Path(__file__).resolve().parents[2]


class Replica:
    """One `wake daemon` process; its stdout (JSON log lines) goes to a file."""

    def __init__(self, config: Path, log: Path, env: dict[str, str]) -> None:
        self.log = log
        self.out = log.open("w")
        self.proc = cli_fork.popen([sys.executable, "-m", "wake", "--config", str(config), "daemon"], stdout=self.out.fileno(), env=env, cwd=REPO)
        self.pid = self.proc.pid

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The log's JSON events so far. Only whole lines: the daemon may be part way through
        writing a long one (a traceback's), and its tail until the newline is not an event yet."""
        found = []
        text = self.log.read_text()
        for line in text[: text.rfind("\n") + 1].splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                if name is None or event.get("event") == name:
                    found.append(event)
        return found

    def wait_event(self, name: str, timeout_s: float = 60, where: Callable[[dict[str, Any]], bool] = lambda e: True) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            hits = [e for e in self.events(name) if where(e)]
            if hits:
                return hits[0]
            if self.proc.poll() is not None:
                raise AssertionError(f"replica {self.pid} exited {self.proc.returncode} before {name}: {self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"no {name} from replica {self.pid} within {timeout_s}s: {self.log.read_text()[-3000:]}")

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def stop(self, timeout_s: float = 30) -> int:
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        finally:
            self.out.close()


def query(dsn: str, sql: str, *args: Any) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        conn = await asyncpg.connect(dsn)
        try:
            return [dict(r) for r in await conn.fetch(sql, *args)]
        finally:
            await conn.close()

    return asyncio.run(run())


def ready_pair(start: Callable[..., Replica], daemon: str, agents: str, extra: str) -> dict[int, Replica]:
    """Two replicas from `start` (the acceptance tests' fixture) on one config, each ready; by pid."""
    replicas = {r.pid: r for r in (start(daemon, agents, extra=extra) for _ in range(2))}
    for r in replicas.values():
        r.wait_event("daemon.ready")
    return replicas
