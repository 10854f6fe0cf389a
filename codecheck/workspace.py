"""An agent's workspace: a git repository whose HEAD its facts are checked against.

`Workspace` keeps the fingerprint (`codecheck.fingerprint`) of the commit HEAD points at:

- HEAD is re-resolved at most every `head_ttl_s` (default 30 s) on an injectable clock; within
  the TTL a moved HEAD is not seen yet, by design: steady reads cost a dictionary lookup.
- Fingerprints are cached per HEAD (the last `keep` of them). When HEAD moves, the new one is
  built incrementally: subtrees whose oid is unchanged are not walked again, and only blobs whose
  oid changed are read and parsed.
- Blobs are read from the HEAD tree with pygit2, never from the working tree: uncommitted edits
  do not count, and a symlink in the tree is a link, never followed on disk.
- A build runs in a worker process by default (`runner="process"`, `codecheck.build_worker`:
  parsing holds the GIL for tens of milliseconds a file, which would starve the daemon's event
  loop if it ran in a thread), or in a thread (`runner="thread"`). Either way a caller can wait
  for it within a budget (`fingerprint_within`) and get `WorkspaceTimeout` rather than a late answer; the build goes on
  and the next read finds it cached. The worker keeps the last fingerprint of each repository
  (with its blob summaries), so the next build there is incremental without sending them back.
- A directory that is not a git repository (it is never searched upward), an empty repository,
  or a HEAD whose tree cannot be read is a `WorkspaceError` with a `kind`: never a fingerprint.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pygit2
from pygit2.enums import FileMode, RepositoryOpenFlag

from codecheck import build_worker
from codecheck.builds import Builder, WorkspaceError, WorkspaceTimeout, run_build
from codecheck.fingerprint import Entry, Fingerprint, assemble, with_timing
from untrusted import folding

__all__ = ["Builder", "Status", "Workspace", "WorkspaceError", "WorkspaceTimeout", "Workspaces", "build", "resolve_head"]

DEFAULT_HEAD_TTL_S = 30.0
DEFAULT_KEEP = 4  # fingerprints kept per workspace (one per recent HEAD)

Clock = Callable[[], float]

Runner = Literal["process", "thread"]

_THREADS = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="wake-fingerprint")
def open_repository(root: Path) -> pygit2.Repository:
    try:
        return pygit2.Repository(str(root), RepositoryOpenFlag.NO_SEARCH)
    except (pygit2.GitError, KeyError, OSError) as exc:
        raise WorkspaceError("not_a_repository", f"{root} is not a git repository ({exc})") from None


def resolve_head(root: Path) -> str:
    """The commit oid HEAD points at."""
    repo = open_repository(root)
    if repo.head_is_unborn:
        raise WorkspaceError("no_commits", f"{root} has no commits yet (HEAD is unborn)")
    try:
        return str(repo.head.peel(pygit2.Commit).id)
    except (pygit2.GitError, KeyError, ValueError) as exc:
        raise WorkspaceError("unreadable", f"cannot resolve HEAD of {root}: {exc}") from None


# -- walking a tree -----------------------------------------------------------------------------

TreeCache = dict[tuple[str, str], tuple[list[Entry], dict[str, str]]]


def _walk(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str, previous: TreeCache, cache: TreeCache
          ) -> tuple[list[Entry], dict[str, str]]:
    """Every blob under `tree` as (path, oid, mode), and symlink targets; an unchanged subtree
    (same prefix, same oid) comes from `previous` without being read."""
    key = (prefix, str(tree.id))
    if key in previous:
        cache[key] = previous[key]
        return previous[key]
    entries: list[Entry] = []
    links: dict[str, str] = {}
    for obj in tree:
        path = f"{prefix}{obj.name}"
        mode = int(obj.filemode)
        if mode == int(FileMode.TREE):
            assert isinstance(obj, pygit2.Tree)
            sub_entries, sub_links = _walk(repo, obj, path + "/", previous, cache)
            entries += sub_entries
            links.update(sub_links)
            continue
        entries.append((path, str(obj.id), mode))
        if mode == int(FileMode.LINK) and isinstance(obj, pygit2.Blob):
            links[path] = obj.data.decode("utf-8", "surrogateescape")
    cache[key] = (entries, links)
    return entries, links


def build(root: Path, head: str, previous: Fingerprint | None) -> Fingerprint:
    """The default builder: walk HEAD's tree, reuse what `previous` knew of unchanged subtrees and blobs."""
    repo = open_repository(root)
    try:
        commit = repo[head]
        assert isinstance(commit, pygit2.Commit)
        tree = commit.tree
    except (KeyError, ValueError, pygit2.GitError, AssertionError) as exc:
        raise WorkspaceError("unreadable", f"cannot read the tree of {head[:12]} in {root}: {exc}") from None
    trees: TreeCache = {}
    old_trees: TreeCache = previous.walk_cache if previous is not None else {}
    entries, links = _walk(repo, tree, "", old_trees, trees)

    def load(oid: str) -> bytes:
        blob = repo[oid]
        if not isinstance(blob, pygit2.Blob):
            raise TypeError(f"{oid} is not a blob")
        return bytes(blob.data)

    return assemble(head, entries, load, previous.cache if previous is not None else None,
                    symlinks=links, walk_cache=trees, previous_skeletons=previous.skeletons if previous is not None else None)


def _build_elsewhere(runner: Runner, builder: Builder, root: str, head: str) -> tuple[Fingerprint, float]:
    if runner == "thread":
        return run_build(builder, root, head)
    try:
        answer = build_worker.WORKER.call((builder, root, head))
    except build_worker.WorkerDied as exc:
        raise WorkspaceError("unreadable", f"building the fingerprint of {root} failed: {exc}") from None
    if answer[0] == "error":
        raise WorkspaceError(answer[1], answer[2])
    fp, build_ms = answer[1]
    return fp, build_ms


# -- the workspace ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Status:
    """What `wake workspace status` shows."""

    root: str
    head: str | None
    head_age_s: float | None          # since HEAD was last resolved
    fingerprint_age_s: float | None   # since the fingerprint of that HEAD was built
    size: dict[str, int]
    build_ms: float | None
    parsed: int
    reused: int
    skipped: list[dict[str, str]]
    building: bool
    error: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Workspace:
    """One git repository, its HEAD (re-resolved at most every `head_ttl_s`) and its fingerprints."""

    def __init__(self, root: Path | str, *, head_ttl_s: float = DEFAULT_HEAD_TTL_S, clock: Clock = time.monotonic,
                 builder: Builder = build, runner: Runner = "process", keep: int = DEFAULT_KEEP) -> None:
        """`builder` must be a module-level function (or a partial of one) for the process runner."""
        if head_ttl_s < 0:
            raise ValueError(f"head_ttl_s must be 0 or more, got {head_ttl_s}")
        if runner not in ("process", "thread"):
            raise ValueError(f"runner must be 'process' or 'thread', got {runner!r}")
        self.runner: Runner = runner
        self.root = Path(os.path.realpath(root))
        self.head_ttl_s = head_ttl_s
        self._clock = clock
        self._builder = builder
        self._keep = keep
        self._lock = threading.Lock()
        self._head: str | None = None
        self._head_at = 0.0
        self._by_head: collections.OrderedDict[str, Fingerprint] = collections.OrderedDict()
        self._inflight: concurrent.futures.Future[Fingerprint] | None = None
        self._error: str | None = None

    def _fresh_head(self) -> str | None:
        if self._head is not None and self._clock() - self._head_at < self.head_ttl_s:
            return self._head
        return None

    def _future(self) -> concurrent.futures.Future[Fingerprint]:
        with self._lock:
            head = self._fresh_head()
            if head is not None and head in self._by_head:
                done: concurrent.futures.Future[Fingerprint] = concurrent.futures.Future()
                done.set_result(self._by_head[head])
                return done
            if self._inflight is None:
                self._inflight = _THREADS.submit(self._refresh, head)
            return self._inflight

    def _refresh(self, known_head: str | None) -> Fingerprint:
        try:
            head = known_head
            if head is None:
                head = resolve_head(self.root)
                with self._lock:
                    self._head, self._head_at = head, self._clock()
            with self._lock:
                cached = self._by_head.get(head)
            if cached is not None:
                return cached
            fp, build_ms = _build_elsewhere(self.runner, self._builder, str(self.root), head)
            fp = with_timing(fp, build_ms=build_ms, built_at=self._clock())
            with self._lock:
                self._by_head[head] = fp
                self._by_head.move_to_end(head)
                while len(self._by_head) > self._keep:
                    self._by_head.popitem(last=False)
                self._error = None
            return fp
        except WorkspaceError as exc:
            self._error = f"{exc.kind}: {exc}"
            raise
        except Exception as exc:  # a builder that broke: typed, never a fingerprint
            self._error = f"unreadable: {exc!r}"
            raise WorkspaceError("unreadable", f"building the fingerprint of {self.root} failed: {exc!r}") from exc
        finally:
            with self._lock:
                self._inflight = None

    def warm(self) -> None:
        """Start resolving HEAD and building its fingerprint now, without waiting (at daemon start,
        so that the first wake's retrieval finds it ready instead of spending its budget). It also
        loads what a check of its facts will use, ICU's confusables and packaging's names, which
        `codecheck.verify.warm` would otherwise load before the first retrieval."""
        self._future()
        folding.warm()
        from packaging.utils import canonicalize_name

        canonicalize_name("warm")

    def fingerprint(self, timeout_s: float | None = None) -> Fingerprint:
        """The fingerprint of HEAD, waiting for a build (at most `timeout_s`, else for as long as it takes)."""
        future = self._future()
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            raise WorkspaceTimeout(f"the fingerprint of {self.root} was not ready within {(timeout_s or 0) * 1000:.0f} ms "
                                   "(it goes on building)") from None

    async def fingerprint_within(self, budget_s: float) -> Fingerprint:
        """The fingerprint of HEAD if it is ready within `budget_s`; else `WorkspaceTimeout`, and
        the build goes on so that a later read finds it. Starting the build (resolving HEAD, and
        the worker process when none runs) counts against `budget_s`."""
        started = time.perf_counter()
        future = self._future()
        if future.done():
            return future.result()
        waiting = asyncio.wrap_future(future)
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), max(0.0, budget_s - (time.perf_counter() - started)))
        except TimeoutError:
            waiting.add_done_callback(_retrieve)
            raise WorkspaceTimeout(f"the fingerprint of {self.root} was not ready within {budget_s * 1000:.0f} ms "
                                   "(it goes on building)") from None

    def status(self) -> Status:
        with self._lock:
            now = self._clock()
            fp = self._by_head.get(self._head) if self._head is not None else None
            return Status(
                root=str(self.root), head=self._head, head_age_s=now - self._head_at if self._head else None,
                fingerprint_age_s=now - fp.built_at if fp else None, size=fp.size() if fp else {},
                build_ms=fp.build_ms if fp else None, parsed=fp.parsed if fp else 0, reused=fp.reused if fp else 0,
                skipped=[{"path": s.path, "reason": s.reason} for s in fp.skipped] if fp else [],
                building=self._inflight is not None, error=self._error,
            )


def _retrieve(future: asyncio.Future[Any]) -> None:
    """A build nobody waits for any more: take its exception so it is not reported as lost."""
    if not future.cancelled():
        future.exception()


class Workspaces:
    """One `Workspace` per repository root and TTL, shared by everything in the process that reads it."""

    def __init__(self, *, clock: Clock = time.monotonic, runner: Runner = "process") -> None:
        self._clock, self._runner = clock, runner
        self._lock = threading.Lock()
        self._open: dict[tuple[str, float], Workspace] = {}

    def get(self, root: Path | str, head_ttl_s: float = DEFAULT_HEAD_TTL_S) -> Workspace:
        key = (os.path.realpath(root), head_ttl_s)
        with self._lock:
            if key not in self._open:
                self._open[key] = Workspace(key[0], head_ttl_s=head_ttl_s, clock=self._clock, runner=self._runner)
            return self._open[key]


# The process's workspaces: one `Workspace` per repository and TTL, shared by the facts block's
# check (`wake.arrival.code_check.WORKSPACES` is this one) and the fact tools' look-alike check.
PROCESS = Workspaces()
