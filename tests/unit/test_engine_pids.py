"""A stale engine pid file: pids wrap, and the process that now has the pid is not the engine."""

from __future__ import annotations

import os
from pathlib import Path

from wake.stores import engines


def test_a_pid_file_naming_a_live_process_that_is_no_engine_names_no_engine(tmp_path: Path) -> None:
    (tmp_path / "postgres").mkdir()
    (tmp_path / "redis").mkdir()
    mine = os.getpid()  # alive, and a Python interpreter: what a wrapped pid can point at
    (tmp_path / "postgres" / "postmaster.pid").write_text(f"{mine}\n/data\n")
    (tmp_path / "redis" / "redis.pid").write_text(f"{mine}\n")
    assert engines.engine_pids(tmp_path) == {}


def test_a_pid_file_of_a_dead_process_names_no_engine(tmp_path: Path) -> None:
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "redis.pid").write_text("999999999\n")
    assert engines.engine_pids(tmp_path) == {}
