"""The suite on parallel workers: how many `-n auto` starts, and what a worker keeps to itself on a
shared external server (tests/integration/test_workers.py: its own embedded engines)."""

from __future__ import annotations

import pytest

from tests.support import workers


def test_auto_is_one_worker_per_core_capped_or_the_explicit_count() -> None:
    assert workers.auto_workers(2, {}) == 2
    assert workers.auto_workers(64, {}) == workers.MAX_AUTO_WORKERS
    assert workers.auto_workers(None, {}) == 1
    assert workers.auto_workers(2, {"WAKE_TEST_WORKERS": "6"}) == 6
    assert workers.auto_workers(2, {"WAKE_TEST_WORKERS": "0"}) == 0  # the tests run in the pytest process
    with pytest.raises(pytest.UsageError, match=r"WAKE_TEST_WORKERS must be a whole number of workers .* not 'two'"):
        workers.auto_workers(2, {"WAKE_TEST_WORKERS": "two"})


def test_each_worker_has_its_own_redis_database_on_a_shared_server() -> None:
    assert workers.redis_url_for_worker("redis://:pw@db:6379/0", 0) == "redis://:pw@db:6379/0"
    assert workers.redis_url_for_worker("redis://:pw@db:6379/2", 3) == "redis://:pw@db:6379/5"
    assert workers.redis_url_for_worker("rediss://db:6380", 1) == "rediss://db:6380/1"
    assert workers.redis_url_for_worker("unix:///run/redis.sock?db=1&password=pw", 2) == "unix:///run/redis.sock?db=3&password=pw"
    assert workers.redis_url_for_worker("unix:///run/redis.sock", 1) == "unix:///run/redis.sock?db=1"
    urls = {workers.redis_url_for_worker("redis://db/0", i) for i in range(workers.MAX_AUTO_WORKERS)}
    assert len(urls) == workers.MAX_AUTO_WORKERS


def test_each_worker_has_its_own_template_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert (workers.worker_id(), workers.worker_index()) == ("gw3", 3)
    assert workers.template_database("wake_test_template") == "wake_test_template_gw3"
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert (workers.worker_id(), workers.worker_index()) == ("main", 0)
    assert workers.template_database("wake_test_template") == "wake_test_template"
