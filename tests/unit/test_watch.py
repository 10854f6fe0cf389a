"""`wake status --watch`: the view of one snapshot (rendered to text by rich), and the refresh loop."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import uuid
from typing import Any

from rich.console import Console

from wake.errors import StoreUnavailable
from wake.observe import watch

T0 = dt.datetime(2026, 7, 16, 9, 30, tzinfo=dt.UTC)
WAKE = uuid.UUID("4c608aeb-d52c-4051-b606-ca2ea50ace34")


def snapshot(**changes: Any) -> dict[str, Any]:
    """A snapshot shaped like `wake status --json` plus `recent` ledger rows (datetimes, as the ledger returns them)."""
    snap: dict[str, Any] = {
        "at": T0.isoformat(),
        "redis": "unix:///run/wake/redis.sock",
        "daemon_alive": True,
        "replicas": [
            {
                "replica_id": "box:4242:ab12cd34",
                "host": "box",
                "pid": 4242,
                "version": "0.1.0",
                "started_at": (T0 - dt.timedelta(hours=3)).isoformat(),
                "heartbeat_at": (T0 - dt.timedelta(seconds=4)).isoformat(),
                "heartbeat_age_s": 4.0,
            }
        ],
        "running": [
            {
                "agent": "demo",
                "tier": "full",
                "wake_id": "9d1f0c2e-0000-4000-8000-000000000001",
                "trigger": "schedule",
                "started_at": (T0 - dt.timedelta(seconds=12)).isoformat(),
                "fence": 7,
                "replica_id": "box:4242:ab12cd34",
            }
        ],
        "leases": [
            {"agent": "demo", "held": True, "holder": "box:4242:9f9f", "ttl_s": 51.2, "fence": 7},
            {"agent": "scout", "held": False, "holder": None, "ttl_s": None, "fence": 3},
        ],
        "next_fires": [
            {"agent": "demo", "tier": "whisper", "at": (T0 + dt.timedelta(minutes=15)).isoformat()},
            {"agent": "scout", "tier": "whisper", "at": None},
        ],
        "pending_requests": 2,
        "recent": [
            {
                "wake_id": WAKE,
                "agent_id": "demo",
                "tier": "whisper",
                "trigger": "schedule",
                "status": "failed",
                "started_at": T0 - dt.timedelta(minutes=15),
                "finished_at": T0 - dt.timedelta(minutes=15) + dt.timedelta(seconds=2.5),
                "model": "llama3.2",
                "cost_usd": 0.0012,
                "note": None,
                "error": "RuntimeError: the model server went away",
            },
            {
                "wake_id": uuid.UUID("00000000-0000-4000-8000-00000000000b"),
                "agent_id": "scout",
                "tier": "whisper",
                "trigger": "manual",
                "status": "started",
                "started_at": T0 - dt.timedelta(seconds=3),
                "finished_at": None,
                "model": None,
                "cost_usd": 0,
                "note": None,
                "error": None,
            },
        ],
    }
    snap.update(changes)
    return snap


def text(view: Any, width: int = 180) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(view)
    return console.export_text()


def row(screen: str, *cells: str) -> bool:
    """Some line of the screen holds these cells, in this order."""
    for line in screen.splitlines():
        at = 0
        for cell in cells:
            at = line.find(cell, at)
            if at < 0:
                break
            at += len(cell)
        else:
            return True
    return False


def test_every_part_of_the_status_is_shown() -> None:
    screen = text(watch.render(snapshot()))
    assert screen.startswith("wake status  2026-07-16 09:30:00 UTC  redis unix:///run/wake/redis.sock")
    assert "replicas (1 live)" in screen and row(screen, "box:4242:ab12cd34", "box", "4242", "0.1.0", "2026-07-16 06:30:00", "4s ago")
    assert row(screen, "demo", "full", "schedule", "9d1f0c2e-0000-4000-8000-000000000001", "12s ago", "7", "box:4242:ab12cd34")
    assert row(screen, "demo", "yes", "box:4242:9f9f", "51.2s", "7") and row(screen, "scout", "no", "-", "-", "3")
    assert row(screen, "demo", "whisper", "2026-07-16 09:45:00", "in 15m") and row(screen, "scout", "whisper", "not scheduled")
    assert row(
        screen,
        "2026-07-16 09:15:00",
        "demo",
        "whisper",
        "schedule",
        "failed",
        "2.5s",
        "$0.0012",
        "4c608aeb",
        "RuntimeError: the model server went away",
    )
    assert row(screen, "scout", "whisper", "manual", "started", "running", "-")
    assert screen.rstrip().endswith("trigger requests waiting: 2")


def test_the_json_form_of_a_snapshot_renders_the_same() -> None:
    as_json = json.loads(json.dumps(snapshot(), default=lambda v: v.isoformat() if isinstance(v, dt.datetime) else str(v)))
    assert text(watch.render(as_json)) == text(watch.render(snapshot()))


def test_no_daemon_alive() -> None:
    screen = text(watch.render(snapshot(daemon_alive=False, replicas=[], running=[], next_fires=[], recent=[])))
    assert "no daemon alive (no replica heartbeat in redis at unix:///run/wake/redis.sock)" in screen
    assert "running wakes: none" in screen and "recent outcomes: none" in screen
    assert "next fires: unknown (no daemon alive to schedule them)" in screen
    assert "REPLICA" not in screen


def test_a_long_note_is_clipped_to_one_line() -> None:
    recent = [dict(snapshot()["recent"][0], error="x" * 500)]
    screen = text(watch.render(snapshot(recent=recent)), width=400)
    assert "x" * 59 + "…" in screen and "x" * 61 not in screen


def test_the_loop_keeps_the_last_view_when_a_fetch_fails() -> None:
    fetched: list[int] = []

    async def fetch() -> dict[str, Any]:
        fetched.append(1)
        if len(fetched) == 3:
            raise StoreUnavailable("redis", "unix:///run/wake/redis.sock", "connection refused")
        return snapshot(pending_requests=len(fetched))

    console = Console(record=True, width=180, file=io.StringIO())
    asyncio.run(watch.watch(fetch, 0, console=console, frames=3))
    screen = console.export_text()  # not a terminal: rich prints the last frame only
    assert len(fetched) == 3
    assert "stale: could not refresh (redis unreachable at unix:///run/wake/redis.sock: connection refused)" in screen
    assert "trigger requests waiting: 2" in screen  # the second fetch's view, still shown


def test_a_first_fetch_that_fails_says_why_with_secrets_redacted() -> None:
    async def fetch() -> dict[str, Any]:
        raise ConnectionError("Error connecting to redis://:hunter2-password@10.1.2.3:6379")

    console = Console(record=True, width=180, file=io.StringIO())
    asyncio.run(watch.watch(fetch, 0, console=console, frames=1))
    screen = console.export_text()
    assert "could not fetch the status: ConnectionError: Error connecting to redis://:***@10.1.2.3:6379" in screen
    assert "hunter2" not in screen
