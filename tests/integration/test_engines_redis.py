"""The embedded Redis's own admin client: the last process out shuts the server down (saving
first) without waiting on retries. SHUTDOWN closes the connection under the client by design, and
redis-py's default retry (10 attempts with backoff in 8.x) made it a 4 s sleep at the exit of
every command that had opened Redis."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis.retry

from wake.stores import engines


def test_the_last_process_out_shuts_redis_down_without_a_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = engines.EmbeddedRedis(tmp_path / "redis", linger=False)
    engine.join()
    pid = int((tmp_path / "redis" / "redis.pid").read_text())
    with engine._client() as client:
        client.set("fence:demo", 7)  # saved by the shutdown
    sleeps: list[float] = []
    real_sleep = time.sleep

    def counted(seconds: float) -> None:
        sleeps.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(redis.retry, "sleep", counted)  # what redis-py's Retry sleeps with between attempts
    engine.leave()
    assert sleeps == []  # no attempt after the connection SHUTDOWN closed
    try:
        psutil.Process(pid).wait(timeout=60)
    except psutil.NoSuchProcess:
        pass
    assert not engine._running() and sleeps == []  # and a socket nobody serves is "not running" at once
    assert (tmp_path / "redis" / "dump.rdb").exists()

    engine = engines.EmbeddedRedis(tmp_path / "redis", linger=False)
    engine.join()  # started again from what was saved
    try:
        with engine._client() as client:
            assert client.get("fence:demo") == b"7"
    finally:
        engine.leave()


def test_a_refused_socket_is_not_running_at_once_and_a_silent_one_is_pinged_again(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    engine = engines.EmbeddedRedis(tmp_path / "redis", linger=False)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(engine.socket))
    stale.close()  # the file of a server that died: nobody listens
    clients = 0
    make_client = engine._client

    def counted_client() -> Any:
        nonlocal clients
        clients += 1
        return make_client()

    monkeypatch.setattr(engine, "_client", counted_client)
    assert not engine._running() and clients == 1  # refused: once, no second try (a retry would only sleep)

    engine.socket.unlink()
    monkeypatch.setattr(engines, "_ADMIN_TIMEOUT_S", 0.2)
    silent = socket.socket(socket.AF_UNIX)  # a server that accepts and never answers: frozen, or very busy
    silent.bind(str(engine.socket))
    silent.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        silent.settimeout(30)
        for _ in range(engines._PING_ATTEMPTS):
            conn, _ = silent.accept()
            accepted.append(conn)

    acceptor = threading.Thread(target=accept)
    acceptor.start()
    try:
        assert not engine._running()  # after its attempts, a server that never answers counts as not running
    finally:
        acceptor.join(timeout=30)
        for conn in accepted:
            conn.close()
        silent.close()
    assert len(accepted) == engines._PING_ATTEMPTS  # one connection a ping: each timed-out ping was tried again


def test_a_server_whose_directory_was_deleted_is_killed_by_the_last_process_out(tmp_path: Path) -> None:
    """A state directory deleted before the at-exit cleanup (a benchmark's temporary one) takes
    the socket with it, and a Redis that cannot save refuses SHUTDOWN: without this the server ran
    on for ever, trying to save every few seconds into a directory that is gone."""
    engine = engines.EmbeddedRedis(tmp_path / "state" / "redis", linger=False)
    other = engines.EmbeddedRedis(tmp_path / "other" / "redis", linger=False)
    engine.join()
    other.join()
    try:
        pid = int((tmp_path / "state" / "redis" / "redis.pid").read_text())
        other_pid = int((tmp_path / "other" / "redis" / "redis.pid").read_text())
        assert engine._serves_here(pid) and not engine._serves_here(other_pid)  # a pid is killed only where it works
        shutil.rmtree(tmp_path / "state")
        engine.leave()
        try:
            psutil.Process(pid).wait(timeout=30)
        except psutil.NoSuchProcess:
            pass
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert not (tmp_path / "state").exists()  # leaving made no directory again
        assert other._running()  # the other state directory's Redis is untouched
    finally:
        other.leave()
