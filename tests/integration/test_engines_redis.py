"""The embedded Redis's own admin client: the last process out shuts the server down (saving
first) without waiting on retries. SHUTDOWN closes the connection under the client by design, and
redis-py's default retry (10 attempts with backoff in 8.x) made it a 4 s sleep at the exit of
every command that had opened Redis."""

from __future__ import annotations

import time
from pathlib import Path

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
