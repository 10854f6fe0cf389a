"""sd_notify against a real unix datagram socket given as NOTIFY_SOCKET."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wake.daemon import notify


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(2)
    yield path, sock
    sock.close()


def _messages(sock: socket.socket) -> list[str]:
    out = []
    sock.setblocking(False)
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except BlockingIOError:
            return out


def test_ready_status_stopping_reach_the_socket(listener: tuple[str, socket.socket]) -> None:
    path, sock = listener
    n = notify.Notifier.from_env({"NOTIFY_SOCKET": path})
    assert n.enabled
    assert n.ready("next wake demo/whisper at 12:15")
    assert n.status("draining")
    assert n.stopping()
    got = _messages(sock)
    assert got[0].split("\n")[:2] == ["READY=1", "STATUS=next wake demo/whisper at 12:15"]
    assert f"MAINPID={os.getpid()}" in got[0]
    assert got[1:] == ["STATUS=draining", "STOPPING=1"]


def test_abstract_socket_address() -> None:
    name = f"wake-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        assert notify.Notifier(f"@{name}").watchdog()
        assert sock.recv(64) == b"WATCHDOG=1"


def test_without_socket_nothing_is_sent_and_no_watchdog() -> None:
    n = notify.Notifier.from_env({})
    assert not n.enabled and n.ready() is False and n.watchdog_interval_s is None


def test_watchdog_for_another_pid_is_ignored() -> None:
    n = notify.Notifier.from_env({"NOTIFY_SOCKET": "/nowhere", "WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "1"})
    assert n.watchdog_interval_s is None
    mine = notify.Notifier.from_env({"NOTIFY_SOCKET": "/nowhere", "WATCHDOG_USEC": "10000000", "WATCHDOG_PID": str(os.getpid())})
    assert mine.watchdog_interval_s == 5.0


def test_a_vanished_socket_is_logged_not_raised(tmp_path: Path) -> None:
    assert notify.Notifier(str(tmp_path / "gone.sock")).ready() is False


async def test_watchdog_loop_pings_at_half_the_interval(listener: tuple[str, socket.socket]) -> None:
    path, sock = listener
    n = notify.Notifier(path, watchdog_usec=200_000)  # WatchdogSec=0.2 s → a ping every 0.1 s
    assert n.watchdog_interval_s == 0.1
    task = asyncio.create_task(notify.watchdog_loop(n))
    pings: list[str] = []
    deadline = time.monotonic() + 30  # a count, not a time: a loaded machine may stretch the interval
    while len(pings) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        pings += _messages(sock)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(pings) >= 3 and set(pings) == {"WATCHDOG=1"}
