"""One agent's memory repository: markdown files with frontmatter in a git repository (pygit2).

Created on first use with the bootstrap layout (`memory.layout`). Every write, append and
revert is one commit on `refs/heads/<branch>`, authored by the agent, committed by wake, with the
trailers `Wake-Id`, `Fence` and `Tier`. A commit is built from the branch's tree plus the one file
(never from the index), so nothing staged or edited outside the tool rides along with it; the file
is then written to the work tree and the index, so a clean repository stays clean.

Reads come from the branch's tip, never from the work tree: an edit that bypassed the tool is not
seen by the agent until it is committed, and a commit that bypassed the tool is audited by the
canary (`memory.cloister`) before the next wake reads it.

Writers serialize on an exclusive `flock` of `.git/wake-memory.lock` (per open file, so it also
excludes a second writer in the same process); the agent's lease decides who may write at all.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import fcntl
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import DeltaStatus, FileMode, FileStatus, SortMode

from memory import frontmatter, layout, paths, provenance, stamp
from memory.config import MemoryConfig, Mode
from memory.errors import Busy, ContentRefused, FrontmatterRefused, MemoryRefused, NotFound, PathRefused

REQUIRED_TRAILERS = ("Wake-Id", "Fence", "Tier")
LOCK_FILE = "wake-memory.lock"
_TRAILER_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,40}$")
_SUMMARY_MAX = 200
_LOCK_POLL_S = 0.005
_EMAIL_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DESCRIPTIONS_CACHED = 20_000  # blob id -> (description, read_only); cleared when full
_REPOS_CACHED = 10_000  # work tree -> its tip's listing, its newest commits, and its clean stamp; cleared when full
# Per process, so a wake that opens the repository afresh does not read it afresh. Each is keyed so
# that a change made outside the memory tool is seen: a blob's description by the blob's id, a
# listing and the newest commits by the commit they start from, a clean status by the stamp of the
# work tree (`memory.stamp`).
_DESCRIPTIONS: dict[str, tuple[str, bool]] = {}
_LISTINGS: dict[str, tuple[str, tuple[Entry, ...]]] = {}
_LOGS: dict[str, tuple[tuple[str, int, int], tuple[LogEntry, ...]]] = {}
_CLEAN: dict[str, stamp.Stamp] = {}
DATED = re.compile(r"(\d{4}-\d{2}-\d{2})")


@dataclass(frozen=True, kw_only=True)
class WriteResult:
    op: str  # write | append | revert
    commit: str
    parent: str
    path: str
    bytes_before: int | None  # None: the file did not exist
    bytes_after: int | None  # None: the commit removed it (a revert of its creation)


@dataclass(frozen=True, kw_only=True)
class FileView:
    path: str
    text: str
    description: str
    bytes: int
    read_only: bool
    commit: str


@dataclass(frozen=True, kw_only=True)
class Entry:
    path: str
    description: str  # '' when the frontmatter has none (or cannot be read)
    bytes: int
    read_only: bool


@dataclass(frozen=True, kw_only=True)
class Change:
    """An uncommitted change in the work tree or the index, against the branch's tip."""

    path: str
    state: str  # modified | deleted | untracked | staged | typechange | ignored | conflicted


@dataclass(frozen=True, kw_only=True)
class Status:
    head: str
    files: int
    bytes: int
    changes: tuple[Change, ...]
    head_attached: bool  # HEAD is the symbolic ref to the branch, as the tool leaves it


@dataclass(frozen=True, kw_only=True)
class LogEntry:
    commit: str
    at: dt.datetime
    author: str
    summary: str
    trailers: dict[str, str]
    paths: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Hit:
    path: str
    line: int
    text: str


def _utc(at: dt.datetime) -> dt.datetime:
    if at.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return at.astimezone(dt.UTC)


def signature(name: str, at: dt.datetime, email: str | None = None) -> pygit2.Signature:
    """A git signature for `name` at `at` (UTC). An agent's address is `<agent>@wake.invalid`."""
    address = email or f"{_EMAIL_UNSAFE.sub('-', name).strip('-') or 'agent'}@wake.invalid"
    return pygit2.Signature(name, address, int(_utc(at).timestamp()), 0)


def message(op: str, path: str, reason: str, trailers: Mapping[str, str]) -> str:
    """`memory <op> <path>: <reason>`, a blank line, then one `Key: value` line per trailer."""
    missing = [key for key in REQUIRED_TRAILERS if not str(trailers.get(key, "")).strip()]
    if missing:
        raise MemoryRefused("commit.trailers", f"a memory commit needs the trailers {', '.join(REQUIRED_TRAILERS)}; missing {', '.join(missing)}")
    lines = []
    for key, value in trailers.items():
        text = str(value)
        if not _TRAILER_KEY.match(key) or "\n" in text or "\r" in text:
            raise MemoryRefused("commit.trailers", f"trailer {key!r} must be a Token-Name with a one-line value")
        lines.append(f"{key}: {text}")
    summary = " ".join(f"memory {op} {path}: {' '.join(reason.split()) or 'no reason given'}".split())
    if len(summary) > _SUMMARY_MAX:
        summary = summary[: _SUMMARY_MAX - 1] + "…"
    return summary + "\n\n" + "\n".join(lines) + "\n"


def _text(blob: pygit2.Blob) -> str:
    return blob.data.decode("utf-8", errors="replace")


def unified(old: str | None, new: str | None, path: str, *, max_chars: int) -> str:
    """A unified diff of two versions of a file, cut at `max_chars` (and saying so)."""
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
        fromfile=f"a/{path}" if old is not None else "/dev/null", tofile=f"b/{path}" if new is not None else "/dev/null", n=1,
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > max_chars:
        cut = text[:max_chars]
        text = cut[: cut.rfind("\n") + 1 or max_chars] + f"… ({len(text) - max_chars} more characters)\n"
    return text


class MemoryRepo:
    """An agent's memory repository at `path` (its work tree)."""

    def __init__(self, git: pygit2.Repository, config: MemoryConfig, *, bootstrapped: str | None = None) -> None:
        self.git = git
        self.config = config
        # the bootstrap commit, when `open` has just created the repository
        self.bootstrapped = bootstrapped
        workdir = git.workdir
        if workdir is None:
            raise PathRefused("repo.bare", f"{git.path} is a bare repository; memory needs a work tree")
        self.workdir = Path(workdir)

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, path: Path, config: MemoryConfig, *, at: dt.datetime, author: str = "wake") -> MemoryRepo:
        """The repository at `path`, created with the bootstrap layout when there is none (or
        when one was left without a commit)."""
        path = Path(path)
        if (path / ".git").exists():
            git = pygit2.Repository(str(path))
            if not git.head_is_unborn:
                return cls(git, config)
        else:
            path.mkdir(parents=True, exist_ok=True)
            git = pygit2.init_repository(str(path), bare=False, initial_head=config.branch)
        repo = cls(git, config)
        with repo._locked():
            if not git.head_is_unborn:  # another process bootstrapped it first
                return cls(git, config)
            sig = signature(author, at, config.committer_email if author == config.committer_name else None)
            committer = signature(config.committer_name, at, config.committer_email)
            trailers = {"Wake-Id": "bootstrap", "Fence": "-", "Tier": "-", **provenance.OPERATOR_WRITE.trailers()}
            text = message("bootstrap", ".", "the memory layout", trailers)
            commit = git.create_commit(f"refs/heads/{config.branch}", sig, committer, text, repo.bootstrap_tree(), [])
            for name, content in layout.bootstrap(config).items():
                repo._put_worktree(name, content.encode("utf-8"))
            git.index.write()
        return cls(git, config, bootstrapped=str(commit))

    def bootstrap_tree(self) -> pygit2.Oid:
        """The tree id of the bootstrap layout (deterministic: the canary recognises it)."""
        index = pygit2.Index()
        for name, content in sorted(layout.bootstrap(self.config).items()):
            index.add(pygit2.IndexEntry(name, self.git.create_blob(content.encode("utf-8")), FileMode.BLOB))
        return index.write_tree(self.git)

    # ---------------------------------------------------------------- reading

    @property
    def branch_ref(self) -> str:
        return f"refs/heads/{self.config.branch}"

    def head(self) -> str | None:
        """The branch's tip, or None in a repository with no commit."""
        ref = self.git.references.get(self.branch_ref)
        return str(ref.target) if ref is not None else None

    def commit(self, rev: str) -> pygit2.Commit:
        """A commit by id or unique prefix (or any rev git understands)."""
        try:
            obj = self.git.revparse_single(rev)
        except (KeyError, ValueError, pygit2.GitError):
            raise NotFound("commit.unknown", f"no commit {rev!r} in memory") from None
        commit = obj.peel(pygit2.Commit)
        assert isinstance(commit, pygit2.Commit)
        return commit

    def _tip(self) -> pygit2.Commit:
        head = self.head()
        if head is None:
            raise NotFound("repo.empty", "the memory repository has no commit")
        return self.commit(head)

    @staticmethod
    def blob_at(tree: pygit2.Tree, path: str) -> pygit2.Blob | None:
        try:
            obj = tree[path]
        except (KeyError, ValueError):
            return None
        return obj if isinstance(obj, pygit2.Blob) else None

    def text_at(self, commit: pygit2.Commit | None, path: str) -> str | None:
        """The text of `path` in `commit`, or None where it is absent (or no commit)."""
        if commit is None:
            return None
        blob = self.blob_at(commit.tree, path)
        return _text(blob) if blob is not None else None

    def read(self, path: str, *, commit: str | None = None) -> FileView:
        paths.parts(path, max_chars=self.config.max_path_chars)
        at = self.commit(commit) if commit else self._tip()
        blob = self.blob_at(at.tree, path)
        if blob is None:
            raise NotFound("file.unknown", f"no file {path} in memory" + (f" at {str(at.id)[:12]}" if commit else ""))
        text = _text(blob)
        description, read_only = self._described(blob)
        return FileView(path=path, text=text, description=description, bytes=blob.size, read_only=read_only, commit=str(at.id))

    @staticmethod
    def _described(blob: pygit2.Blob) -> tuple[str, bool]:
        key = str(blob.id)
        found = _DESCRIPTIONS.get(key)
        if found is None:
            if len(_DESCRIPTIONS) >= _DESCRIPTIONS_CACHED:
                _DESCRIPTIONS.clear()
            try:
                doc = frontmatter.parse(_text(blob))
                found = (doc.description, doc.read_only)
            except FrontmatterRefused:
                found = ("", False)
            _DESCRIPTIONS[key] = found
        return found

    def files(self, commit: pygit2.Commit | None = None, prefix: str = "") -> Iterator[tuple[str, pygit2.Blob]]:
        """Every file under `prefix` in `commit` (default the tip), in path order."""
        tip = commit or self._tip()
        start: pygit2.Tree = tip.tree
        if prefix:
            try:
                obj = tip.tree[prefix.rstrip("/")]
            except (KeyError, ValueError):
                return
            if not isinstance(obj, pygit2.Tree):
                return
            start = obj
        yield from self._walk_tree(start, prefix)

    def _walk_tree(self, tree: pygit2.Tree, prefix: str) -> Iterator[tuple[str, pygit2.Blob]]:
        for obj in sorted(tree, key=lambda o: o.name or ""):
            name = f"{prefix}{obj.name}"
            if isinstance(obj, pygit2.Tree):
                yield from self._walk_tree(obj, name + "/")
            elif isinstance(obj, pygit2.Blob):
                yield name, obj

    def ls(self, directory: str = "") -> list[Entry]:
        """Every file under `directory` at the tip, with its description and size. The whole
        tree's listing (every wake's `memory` block) is remembered per commit."""
        prefix = paths.directory(directory, config=self.config)
        if not prefix:
            tip = self._tip()
            key = str(self.workdir)
            listed = _LISTINGS.get(key)
            if listed is None or listed[0] != str(tip.id):
                if len(_LISTINGS) >= _REPOS_CACHED:
                    _LISTINGS.clear()
                listed = _LISTINGS[key] = (str(tip.id), tuple(self._listing(tip, "")))
            return list(listed[1])
        entries = self._listing(self._tip(), prefix)
        if not entries and self.blob_at(self._tip().tree, prefix.rstrip("/")) is None:
            raise NotFound("dir.unknown", f"no directory {prefix} in memory")
        return entries

    def _listing(self, commit: pygit2.Commit, prefix: str) -> list[Entry]:
        entries = []
        for name, blob in self.files(commit, prefix=prefix):
            description, read_only = self._described(blob)
            entries.append(Entry(path=name, description=description, bytes=blob.size, read_only=read_only))
        return entries

    def changes(self) -> tuple[Change, ...]:
        """Uncommitted changes: the work tree and the index against HEAD, untracked and ignored
        files included (an ignore rule must not hide a file from the canary). A clean status is
        remembered with the work tree's stamp taken before it (`memory.stamp`), and not asked
        again while the stamp holds."""
        key = str(self.workdir)
        before = stamp.take(self.workdir, Path(self.git.path), self.head())
        if before is not None and _CLEAN.get(key) == before:
            return ()
        found = self._status()
        if found or before is None:
            _CLEAN.pop(key, None)
        else:
            if len(_CLEAN) >= _REPOS_CACHED:
                _CLEAN.clear()
            _CLEAN[key] = before
        return found

    def _status(self) -> tuple[Change, ...]:
        found = []
        for path, flags in sorted(self.git.status(untracked_files="all", ignored=True).items()):
            status = FileStatus(flags)
            if status & FileStatus.CONFLICTED:
                state = "conflicted"
            elif status & FileStatus.IGNORED:
                state = "ignored"
            elif status & FileStatus.WT_NEW:
                state = "untracked"
            elif status & (FileStatus.WT_DELETED | FileStatus.INDEX_DELETED):
                state = "deleted"
            elif status & (FileStatus.WT_TYPECHANGE | FileStatus.INDEX_TYPECHANGE):
                state = "typechange"
            elif status & FileStatus.WT_MODIFIED:
                state = "modified"
            elif status & (FileStatus.INDEX_NEW | FileStatus.INDEX_MODIFIED | FileStatus.INDEX_RENAMED):
                state = "staged"
            else:
                continue
            found.append(Change(path=path, state=state))
        return tuple(found)

    def head_attached(self) -> bool:
        try:
            return self.git.references["HEAD"].target == self.branch_ref
        except (KeyError, pygit2.GitError):
            return False

    def status(self) -> Status:
        count = size = 0
        for _, blob in self.files():
            count, size = count + 1, size + blob.size
        return Status(head=str(self._tip().id), files=count, bytes=size, changes=self.changes(), head_attached=self.head_attached())

    def worktree_text(self, path: str) -> str | None:
        """The text of `path` in the work tree (symlinks not followed), or None."""
        target = self.workdir / path
        if target.is_symlink():
            return f"(a symlink to {os.readlink(target)})"
        if not target.is_file():
            return None
        return target.read_bytes().decode("utf-8", errors="replace")

    # ---------------------------------------------------------------- history

    @staticmethod
    def changed_paths(commit: pygit2.Commit) -> list[tuple[str, DeltaStatus]]:
        """(path, status) of every file `commit` changed against its first parent."""
        if commit.parents:
            diff = commit.parents[0].tree.diff_to_tree(commit.tree)
        else:
            diff = commit.tree.diff_to_tree(swap=True)
        return [(d.new_file.path if d.status != DeltaStatus.DELETED else d.old_file.path, d.status) for d in diff.deltas]

    def _touches(self, commit: pygit2.Commit, path: str) -> bool:
        def entry(c: pygit2.Commit) -> str | None:
            try:
                return str(c.tree[path].id)
            except (KeyError, ValueError):
                return None

        mine = entry(commit)
        if not commit.parents:
            return mine is not None
        return mine != entry(commit.parents[0])

    def log(self, path: str | None = None, *, limit: int = 20, max_walk: int = 100_000) -> list[LogEntry]:
        """The newest commits (touching `path`, when given), newest first. The whole history's
        (every wake's `memory` block) is remembered per tip: a commit's ancestry never changes."""
        if path:
            paths.parts(path, max_chars=self.config.max_path_chars)
        tip = self._tip()
        key, asked = str(self.workdir), (str(tip.id), limit, max_walk)
        if not path:
            logged = _LOGS.get(key)
            if logged is not None and logged[0] == asked:
                return list(logged[1])
        found: list[LogEntry] = []
        for walked, commit in enumerate(self.git.walk(tip.id, SortMode.TOPOLOGICAL | SortMode.TIME)):
            if len(found) >= limit or walked >= max_walk:
                break
            if path and not self._touches(commit, path):
                continue
            found.append(LogEntry(
                commit=str(commit.id), at=dt.datetime.fromtimestamp(commit.author.time, dt.UTC), author=commit.author.name,
                summary=commit.message.splitlines()[0] if commit.message else "", trailers=dict(commit.message_trailers),
                paths=tuple(p for p, _ in self.changed_paths(commit)),
            ))
        if not path:
            if len(_LOGS) >= _REPOS_CACHED:
                _LOGS.clear()
            _LOGS[key] = (asked, tuple(found))
        return found

    def diff(self, path: str | None = None, *, commit: str | None = None, worktree: bool = False, max_chars: int = 20_000) -> str:
        """A unified diff: the uncommitted changes (`worktree`), one commit against its parent
        (`commit`), or the last change to `path` (default: the tip against its parent)."""
        return "".join(text for _, text in self.diff_by_path(path, commit=commit, worktree=worktree, max_chars=max_chars))

    def diff_by_path(
        self, path: str | None = None, *, commit: str | None = None, worktree: bool = False, max_chars: int = 20_000,
    ) -> list[tuple[str, str]]:
        """`diff`, file by file: (path, its unified diff)."""
        if worktree:
            changed = [c.path for c in self.changes() if path is None or c.path == path]
            tip = self._tip()
            return [(p, unified(self.text_at(tip, p), self.worktree_text(p), p, max_chars=max_chars)) for p in changed]
        if commit:
            target = self.commit(commit)
        elif path:
            entries = self.log(path, limit=1)
            if not entries:
                raise NotFound("file.unknown", f"no commit touches {path}")
            target = self.commit(entries[0].commit)
        else:
            target = self._tip()
        parent = target.parents[0] if target.parents else None
        names = [path] if path else [p for p, _ in self.changed_paths(target)]
        return [(p, unified(self.text_at(parent, p), self.text_at(target, p), p, max_chars=max_chars)) for p in names]

    def search(self, query: str, directory: str = "", *, limit: int | None = None) -> tuple[list[Hit], int]:
        """Lines at the tip containing `query` (case-insensitive), at most `limit`, and the exact
        number of matching lines."""
        needle = query.casefold().strip()
        if not needle:
            raise ContentRefused("search.empty", "the search query is empty")
        cap = limit or self.config.search_max_hits
        hits: list[Hit] = []
        total = 0
        for name, blob in self.files(prefix=paths.directory(directory, config=self.config)):
            for number, line in enumerate(_text(blob).splitlines(), start=1):
                if needle in line.casefold():
                    total += 1
                    if len(hits) < cap:
                        hits.append(Hit(path=name, line=number, text=line.strip()[:300]))
        return hits, total

    # ---------------------------------------------------------------- writing

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(Path(self.git.path) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + self.config.lock_timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise Busy("repo.busy", f"the memory repository stayed locked for {self.config.lock_timeout_s:g} s") from None
                    time.sleep(_LOCK_POLL_S)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def _with_blob(self, tree: pygit2.Tree | None, names: list[str], blob: pygit2.Oid | None) -> pygit2.Oid | None:
        """The id of `tree` with the file `names` set to `blob` (removed when None); None when
        the result is an empty subtree."""
        builder = self.git.TreeBuilder(tree) if tree is not None else self.git.TreeBuilder()
        name, rest = names[0], names[1:]
        existing = tree[name] if tree is not None and name in tree else None
        if rest:
            if existing is not None and not isinstance(existing, pygit2.Tree):
                raise PathRefused("path.kind", f"{name!r} is a file in memory, not a directory")
            sub = self._with_blob(existing, rest, blob)
            if sub is None:
                if existing is not None:
                    builder.remove(name)
            else:
                builder.insert(name, sub, FileMode.TREE)
        elif blob is None:
            if existing is not None:
                builder.remove(name)
        else:
            if isinstance(existing, pygit2.Tree):
                raise PathRefused("path.kind", f"{name!r} is a directory in memory, not a file")
            builder.insert(name, blob, FileMode.BLOB)
        return builder.write() if len(builder) else None

    def _put_worktree(self, path: str, data: bytes | None) -> None:
        """Make the work tree and the index hold `data` at `path` (remove it when None)."""
        target = self.workdir / path
        paths.no_symlinks(self.workdir, path.split("/"))
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            with contextlib.suppress(KeyError, OSError, pygit2.GitError):
                self.git.index.remove(path)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(self.git.path) / f"wake-memory.{os.getpid()}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, target)
        self.git.index.add(path)

    def _commit(
        self, op: str, path: str, data: bytes | None, *, parent: pygit2.Commit, reason: str, author: str,
        trailers: Mapping[str, str], at: dt.datetime,
    ) -> WriteResult:
        """Under the lock: one commit on the branch that sets `path` to `data`, then the work tree."""
        text = message(op, path, reason, trailers)
        blob = self.git.create_blob(data) if data is not None else None
        tree = self._with_blob(parent.tree, path.split("/"), blob)
        if tree is None:
            tree = self.git.TreeBuilder().write()
        before = self.blob_at(parent.tree, path)
        commit = self.git.create_commit(
            None, signature(author, at), signature(self.config.committer_name, at, self.config.committer_email), text, tree, [parent.id],
        )
        ref = self.git.references[self.branch_ref]
        if ref.target != parent.id:  # cannot happen under the lock unless someone bypassed it
            raise Busy("repo.moved", "the memory branch moved while this write held the lock; nothing was committed")
        ref.set_target(commit, text.splitlines()[0])
        self.git.index.read(force=True)
        self._put_worktree(path, data)
        self.git.index.write()
        return WriteResult(
            op=op, commit=str(commit), parent=str(parent.id), path=path,
            bytes_before=before.size if before is not None else None, bytes_after=len(data) if data is not None else None,
        )

    def _prepare(self, path: str, content: str) -> bytes:
        data = content.encode("utf-8")
        if "\x00" in content:
            raise ContentRefused("content.binary", "memory files are text; the content holds a NUL byte")
        if len(data) > self.config.max_file_bytes:
            raise ContentRefused("content.size", f"{path} would be {len(data)} bytes; a memory file holds at most {self.config.max_file_bytes}")
        return data

    def _refuse_dirty(self, path: str) -> None:
        try:
            flags = self.git.status_file(path)
        except (KeyError, pygit2.GitError):
            return
        if flags and flags != FileStatus.CURRENT:
            raise ContentRefused(
                "worktree.dirty",
                f"{path} has changes made outside the memory tool (uncommitted); they are kept for review, and the tool does not write over them",
            )

    def write(
        self, path: str, content: str, *, reason: str, author: str, trailers: Mapping[str, str], at: dt.datetime,
        override_read_only: bool = False, op: str = "write",
    ) -> WriteResult:
        """Replace (or create) `path` with `content`: one commit, after every rule has passed."""
        paths.file(path, config=self.config, workdir=self.workdir)
        data = self._prepare(path, content)
        with self._locked():
            parent = self._tip()
            frontmatter.check_write(path, content, self.text_at(parent, path), override_read_only=override_read_only)
            self._refuse_dirty(path)
            return self._commit(op, path, data, parent=parent, reason=reason, author=author, trailers=trailers, at=at)

    def appended(self, path: str, text: str, committed: str | None, at: dt.datetime) -> str:
        """The content after appending `text` to `committed`: a journal entry is headed by its
        UTC time; a missing journal file starts with a frontmatter naming its day."""
        entry = text.strip()
        if not entry:
            raise ContentRefused("content.empty", "there is nothing to append")
        domain = self.config.domain_of(path)
        journal = domain is not None and domain.mode == Mode.APPEND_ONLY
        if committed is None:
            if not journal:
                raise FrontmatterRefused(
                    "frontmatter.description", f"{path} does not exist; write it first, with a frontmatter description, then append",
                )
            dated = DATED.search(path.rsplit("/", 1)[-1])
            day = dated.group(1) if dated else _utc(at).date().isoformat()
            committed = f"---\n{layout.frontmatter_text({'description': f'My journal for {day}.'})}---\n"
        if journal:
            entry = f"## {_utc(at).strftime('%Y-%m-%dT%H:%M:%SZ')}\n\n{entry}"
        return committed.rstrip() + "\n\n" + entry + "\n"

    def append(
        self, path: str, text: str, *, reason: str, author: str, trailers: Mapping[str, str], at: dt.datetime,
    ) -> WriteResult:
        """Add `text` at the end of `path`: one commit."""
        paths.file(path, config=self.config, workdir=self.workdir)
        with self._locked():
            parent = self._tip()
            committed = self.text_at(parent, path)
            content = self.appended(path, text, committed, at)
            data = self._prepare(path, content)
            frontmatter.check_write(path, content, committed)
            self._refuse_dirty(path)
            return self._commit("append", path, data, parent=parent, reason=reason, author=author, trailers=trailers, at=at)

    def revert(
        self, commit: str, path: str, *, reason: str, author: str, trailers: Mapping[str, str], at: dt.datetime,
    ) -> WriteResult:
        """A new commit giving `path` the content it had before `commit` (removing it when
        `commit` created it). An operator's action: read_only and the frontmatter rules do not
        apply, the path need not be in the layout (a file a bypass created can be removed)."""
        paths.parts(path, max_chars=self.config.max_path_chars)
        target = self.commit(commit)
        with self._locked():
            parent = self._tip()
            before = target.parents[0] if target.parents else None
            if before is not None:
                blob = self.blob_at(before.tree, path)
                data = blob.data if blob is not None else None
            else:
                data = None
            current = self.blob_at(parent.tree, path)
            if (current.data if current is not None else None) == data:
                raise ContentRefused("revert.noop", f"{path} already holds what it held before {str(target.id)[:12]}")
            self._refuse_dirty(path)
            return self._commit("revert", path, data, parent=parent, reason=reason, author=author, trailers=trailers, at=at)

    def restore(self, path: str) -> str:
        """Discard an uncommitted change to `path`: the work tree and the index get the tip's
        version back (an untracked file is removed). Returns what was done. An operator's action."""
        paths.parts(path, max_chars=self.config.max_path_chars)
        with self._locked():
            self.git.index.read(force=True)
            blob = self.blob_at(self._tip().tree, path)
            target = self.workdir / path
            if target.is_symlink():
                target.unlink()  # the link itself, never what it points at
            self._put_worktree(path, blob.data if blob is not None else None)
            self.git.index.write()
            return "restored from the tip" if blob is not None else "removed (not in the tip)"

    def undo(self, result: WriteResult) -> bool:
        """Take back a commit this process just made (its record could not be kept): the branch
        goes back to its parent, if nothing came after it. Returns whether it did."""
        with self._locked():
            if self.head() != result.commit:
                return False
            parent = self.commit(result.parent)
            self.git.references[self.branch_ref].set_target(parent.id, f"memory undo {result.commit[:12]}")
            self.git.index.read(force=True)
            blob = self.blob_at(parent.tree, result.path)
            self._put_worktree(result.path, blob.data if blob is not None else None)
            self.git.index.write()
            return True
