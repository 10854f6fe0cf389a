"""A real memory repository in a temporary directory, and the real `git` binary to tamper with it
the way an agent with a shell could (the canary must catch what bypasses the memory tool)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memory.config import MemoryConfig
from memory.repo import MemoryRepo

NOW = dt.datetime(2026, 5, 6, 21, 0, tzinfo=dt.UTC)
TRAILERS = {"Wake-Id": "00000000-0000-0000-0000-000000000001", "Fence": "7", "Tier": "full"}
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "someone", "GIT_AUTHOR_EMAIL": "someone@example.invalid",
    "GIT_COMMITTER_NAME": "someone", "GIT_COMMITTER_EMAIL": "someone@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}

requires_git = pytest.mark.skipif(shutil.which("git") is None, reason="the real git binary is needed to make commits that bypass the memory tool")


def git(repo: MemoryRepo | Path, *args: str) -> str:
    """Run the real git in the repository's work tree; its stdout."""
    where = repo.workdir if isinstance(repo, MemoryRepo) else repo
    done = subprocess.run(
        ["git", "-C", str(where), *args], capture_output=True, text=True, env={**os.environ, **_GIT_ENV}, check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def open_repo(tmp_path: Path, config: MemoryConfig | None = None, name: str = "memory") -> MemoryRepo:
    return MemoryRepo.open(tmp_path / name, config or MemoryConfig(), at=NOW)


def doc(description: str, body: str = "", **keys: str) -> str:
    head = "".join(f"{k}: {v}\n" for k, v in keys.items())
    return f"---\ndescription: {description}\n{head}---\n{body}"


def write(repo: MemoryRepo, path: str, content: str, *, at: dt.datetime = NOW) -> str:
    """A write through the tool; returns its commit."""
    return repo.write(path, content, reason="test", author="ani", trailers=TRAILERS, at=at).commit
