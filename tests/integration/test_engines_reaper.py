"""The reaper of lingering engines stops what a deleted (or deleted and remade) state directory left running."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import psutil
import pytest

from wake.stores import engines


@pytest.mark.parametrize("remade", [False, True], ids=["deleted", "deleted_and_remade"])
def test_the_reaper_stops_the_engine_of_a_deleted_state_directory(tmp_path: Path, remade: bool) -> None:
    state = tmp_path / "state"
    engines.start_redis(state, idle_s=600)  # lingers: only the reaper can stop it now
    pid = engines.engine_pids(state)["redis"]
    deadline = time.monotonic() + 60
    while not engines.reaper_running(state):
        assert time.monotonic() < deadline, "no reaper started for a lingering engine"
        time.sleep(0.1)
    shutil.rmtree(state)  # as a benchmark's temporary directory goes, before any at-exit cleanup
    if remade:  # `rm -rf state && mkdir state`: the path names an empty directory again at once
        state.mkdir()
    try:
        psutil.Process(pid).wait(timeout=60)
    except psutil.NoSuchProcess:
        pass
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
