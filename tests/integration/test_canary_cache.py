"""What a wake's memory remembers between wakes (the clean work-tree status, the tree's listing)
never hides a change made outside the memory tool: after a wake that used the cache, an edit with
its mtime put back, a commit by hand and a file added are each caught by the next wake's canary.
Counts of the git status the canary asks for, not times."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest

from ledgers import memory_ledger as ledger
from memory import stamp
from memory.config import MemoryConfig
from memory.repo import MemoryRepo
from tests.support.memory_git import NOW, doc, git, open_repo, requires_git

pytestmark = requires_git
AGENT = "ani"
TICK_BOUND_S = 30


@pytest.fixture
def statuses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every git status the canary asks for (the work tree it was asked about), and a clock moved
    on far enough that a stamp of the tree is trusted (it is not racy)."""
    asked: list[str] = []
    status = MemoryRepo._status

    def counted(self: MemoryRepo) -> tuple[object, ...]:
        asked.append(str(self.workdir))
        return status(self)

    monkeypatch.setattr(MemoryRepo, "_status", counted)
    monkeypatch.setattr(stamp, "_now_ns", lambda: time.time_ns() + 10 * stamp.RACY_NS)
    return asked


async def wake_canary(conn: asyncpg.Connection, path: Path) -> ledger.CanaryResult:
    """The canary as a wake runs it: the repository opened afresh, the quiet read first."""

    @contextlib.asynccontextmanager
    async def read() -> AsyncIterator[asyncpg.Connection]:
        yield conn

    @contextlib.asynccontextmanager
    async def write() -> AsyncIterator[asyncpg.Connection]:
        async with conn.transaction():
            yield conn

    repo = MemoryRepo.open(path, MemoryConfig(), at=NOW)
    return await ledger.run_canary(read, write, repo, agent_id=AGENT, wake_id=None, at=NOW)


def tick_past(repo: MemoryRepo) -> None:
    """Wait until the file system's clock has moved past every time the tree holds, so that the
    bypass below cannot share a tick with what the stamp saw (the racy case `memory.stamp` guards
    against with real time, which this test has moved on)."""
    newest = max(max(p.lstat().st_mtime_ns, p.lstat().st_ctime_ns) for p in repo.workdir.rglob("*"))
    probe = repo.workdir.parent / "tick"
    deadline = time.monotonic() + TICK_BOUND_S
    while True:
        probe.write_text("tick")
        if probe.stat().st_ctime_ns > newest:
            return
        assert time.monotonic() < deadline, f"the file system clock did not move in {TICK_BOUND_S}s"
        time.sleep(0.001)


def edited_keeping_its_mtime(repo: MemoryRepo) -> str:
    path = next(e.path for e in repo.ls() if not e.read_only)
    target = repo.workdir / path
    before = target.stat()
    text = target.read_text()
    changed = text.replace("(not written yet)", "(NOT WRITTEN YET)", 1) if "(not written yet)" in text else text[:-2] + "X\n"
    assert changed != text and len(changed.encode()) == before.st_size
    target.write_text(changed)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)  # only the ctime tells
    return "worktree.modified"


def committed_by_hand(repo: MemoryRepo) -> str:
    (repo.workdir / "reference").mkdir(exist_ok=True)
    (repo.workdir / "reference" / "by-hand.md").write_text(doc("made outside the tool"))
    git(repo, "add", "reference/by-hand.md")
    git(repo, "commit", "-q", "-m", "by hand")
    return "bypass.commit"


def added(repo: MemoryRepo) -> str:
    (repo.workdir / "reference").mkdir(exist_ok=True)
    (repo.workdir / "reference" / "added.md").write_text(doc("left in the work tree"))
    return "worktree.untracked"


BYPASSES: dict[str, Callable[[MemoryRepo], str]] = {
    "edited, its mtime put back": edited_keeping_its_mtime, "committed by hand": committed_by_hand, "added": added,
}


@pytest.mark.parametrize("bypass", list(BYPASSES))
async def test_a_bypass_after_a_cached_wake_is_caught_by_the_next(
    conn: asyncpg.Connection, tmp_path: Path, statuses: list[str], bypass: str,
) -> None:
    repo = open_repo(tmp_path)
    first = await wake_canary(conn, repo.workdir)  # audits the bootstrap, asks git for the status
    assert first.audit.findings == () and len(statuses) == 1
    for _ in range(2):  # quiet wakes: the stamp says nothing moved, so git is not asked again
        quiet = await wake_canary(conn, repo.workdir)
        assert quiet.open is not None and quiet.audit.findings == ()
    assert len(statuses) == 1
    tick_past(repo)

    rule = BYPASSES[bypass](repo)

    caught = await wake_canary(conn, repo.workdir)
    assert rule in {f.rule for f in caught.audit.findings}, caught.audit.findings
    assert caught.recorded >= 1 and len(statuses) > 1  # the stamp moved: git was asked again
    assert rule in {f.rule for _, f in caught.new}  # recorded in the ledger, not only seen


async def test_the_tree_listing_follows_a_commit_by_hand(conn: asyncpg.Connection, tmp_path: Path, statuses: list[str]) -> None:
    repo = open_repo(tmp_path)
    listed = [e.path for e in MemoryRepo.open(repo.workdir, MemoryConfig(), at=NOW).ls()]
    assert "reference/by-hand.md" not in listed
    committed_by_hand(repo)
    fresh = MemoryRepo.open(repo.workdir, MemoryConfig(), at=NOW)
    assert [e.path for e in fresh.ls()] == sorted([*listed, "reference/by-hand.md"])
    described = {e.path: e.description for e in fresh.ls()}
    assert described["reference/by-hand.md"] == "made outside the tool"


def test_a_stamp_is_not_trusted_while_the_tree_is_racy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = open_repo(tmp_path)
    entries = [repo.workdir, *repo.workdir.rglob("*")]
    newest = max(max(p.lstat().st_mtime_ns, p.lstat().st_ctime_ns) for p in entries if ".git" not in p.relative_to(repo.workdir).parts[:1])
    newest = max(newest, *(os.stat(Path(repo.git.path) / n).st_ctime_ns for n in ("index", "HEAD")))
    monkeypatch.setattr(stamp, "_now_ns", lambda: newest + stamp.RACY_NS - 1)
    assert stamp.take(repo.workdir, Path(repo.git.path), repo.head()) is None
    monkeypatch.setattr(stamp, "_now_ns", lambda: newest + stamp.RACY_NS)
    taken = stamp.take(repo.workdir, Path(repo.git.path), repo.head())
    assert taken is not None and taken[0] == repo.head()
    assert {e[0] for e in taken[1]} >= {".git/index", ".git/HEAD", "", *(e.path for e in repo.ls())}
