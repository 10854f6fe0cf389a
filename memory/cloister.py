"""The Cloister canary: frontmatter as schema, the diff as canary.

At the start of every wake the canary audits what changed in the agent's memory since the last
audited commit: every commit between it and the branch's tip, and the work tree (uncommitted
edits, staged changes, untracked and ignored files). It reads only those commits' diffs, the
files of the domains they touched and the work tree's status, so its cost follows the size of
the change, not the length of the history.

It catches what the memory tool would never have done:

- a commit the tool did not make (`bypass.commit`: not among the `known` commits, which come from
  `memory_writes`; a forged `Wake-Id` trailer does not make a commit known);
- an uncommitted change (`worktree.<state>`);
- a tip that does not descend from the last audited commit, or a last audited commit that is gone
  (`history.rewritten`, always HALT), and a HEAD moved off the branch (`history.head_moved`, HALT);
- more new commits than any wake makes (`audit.too_many_commits`, HALT).

And it holds every change, the tool's own included, to its domain's schema:

- `frontmatter.invalid`: the file's frontmatter is not a valid schema (no description, bad YAML);
- `read_only.changed`: a file marked `read_only: true` changed (HALT: the tool refuses this);
- `fields.missing`: a field the domain expects is gone from every file of the domain;
- `fields.changed` (KEY_FIELDS, STRUCTURAL): the value of an expected field changed;
- `domain.changed` (STRUCTURAL): any other change in the domain, at the domain's `other_changes`;
- `file.deleted`: a file was removed (the tool never removes one);
- `journal.rewritten` / `journal.deleted` (WARN): a journal file changed other than at its end,
  or was removed; `journal.undated` (LOG): a journal file whose name holds no date;
- `layout.unknown` (WARN): a path outside the layout;
- `file.too_large`: a file larger than `max_file_bytes` (the tool's own bound), which the canary
  names and does not read; `file.symlink`: a symbolic link (the tool writes only files; the link's
  target is named, never followed); `file.unreadable`: a work-tree file the canary could not read.
- `injection.invisible`, `injection.instruction`, `injection.trigger`, `injection.tool_order`: the
  lines a change added read as orders to the model, or hide characters (`memory.injection`).

Excerpts are stored escaped (control characters, NUL included, as `\\xNN`) and bounded
(`excerpt_max_chars`), so no byte a file holds can stop the canary from recording it.

A finding's severity is its domain's unless said otherwise above; outside any domain it is WARN.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from dataclasses import dataclass, field

import pygit2
from pygit2.enums import DeltaStatus, FileMode, SortMode

from memory import frontmatter, injection
from memory.config import Domain, MemoryConfig, Mode, Severity
from memory.errors import FrontmatterRefused, NotFound
from memory.repo import DATED, MemoryRepo, unified

WORKTREE = "worktree"


@dataclass(frozen=True, kw_only=True)
class Finding:
    severity: Severity
    domain: str  # '' outside every domain
    path: str  # '' for a finding about the whole repository
    commit: str | None  # None: the work tree
    rule: str
    excerpt: str

    @property
    def fingerprint(self) -> str:
        """The same finding raised again (an uncommitted edit seen by the next wake) has the same
        fingerprint, so it is recorded once."""
        key = "\x00".join((self.rule, self.path, self.commit or WORKTREE, self.excerpt))
        return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Range:
    """What an audit covers: the commits after `base` up to `head`, oldest first."""

    since: str | None  # the last audited commit
    base: str | None  # where the walk stops: `since`, or its merge base with `head` after a rewrite
    head: str | None
    commits: tuple[str, ...]
    rewritten: str | None  # why the history is not a continuation of `since`, or None
    truncated: bool  # more commits than `max_commits_per_audit`: only the newest are audited


@dataclass(frozen=True, kw_only=True)
class Audit:
    range: Range
    findings: tuple[Finding, ...]
    worktree_changes: int
    paths_checked: int
    dropped: int = 0  # findings beyond `max_findings_per_audit` (an `audit.truncated` finding says so)
    by_severity: dict[str, int] = field(default_factory=dict)

    @property
    def halted(self) -> bool:
        return any(f.severity == Severity.HALT for f in self.findings)


# Control characters but the tab and the newline: a text column cannot hold NUL, and a terminal
# showing an excerpt must not receive escapes from a file.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def escaped(text: str) -> str:
    """`text` with every control character but tab and newline written `\\xNN`."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _clip(text: str, config: MemoryConfig) -> str:
    text = escaped(text)
    limit = config.excerpt_max_chars
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_parents(repo: MemoryRepo, head: str, stop: str | None, limit: int) -> tuple[list[str], bool, bool]:
    """The first-parent chain from `head` back to `stop` (excluded), newest first, at most
    `limit`: (commits, whether `stop` was met, whether the limit cut the walk). Lazy: it reads
    only the commits it returns, whatever the length of the history behind them."""
    walker = repo.git.walk(head, SortMode.NONE)
    walker.simplify_first_parent()
    commits: list[str] = []
    for commit in walker:
        sha = str(commit.id)
        if sha == stop:
            return commits, True, False
        if len(commits) == limit:
            return commits, False, True
        commits.append(sha)
    return commits, False, False


def pending(repo: MemoryRepo, since: str | None) -> Range:
    """The commits an audit after `since` must read, oldest first.

    The memory tool only ever adds a commit on top of the tip, so the first-parent chain from the
    tip back to `since` is the whole change, and a merge (only made by hand) is audited against
    its first parent, which shows everything it brought. Only when `since` is not on that chain
    is the graph searched (a rewritten history: rare, and then its cost does not matter)."""
    limit = repo.config.max_commits_per_audit
    head = repo.head()
    if head is None:
        why = f"the branch is gone; the last audited commit was {since[:12]}" if since else None
        return Range(since=since, base=None, head=None, commits=(), rewritten=why, truncated=False)
    if head == since:  # every wake that finds nothing new: no walk at all
        return Range(since=since, base=since, head=head, commits=(), rewritten=None, truncated=False)
    if since is None:
        commits, _, truncated = _first_parents(repo, head, None, limit)
        return Range(since=None, base=None, head=head, commits=tuple(reversed(commits)), rewritten=None, truncated=truncated)
    commits, met, truncated = _first_parents(repo, head, since, limit)
    if met:
        return Range(since=since, base=since, head=head, commits=tuple(reversed(commits)), rewritten=None, truncated=False)
    try:
        repo.commit(since)
    except NotFound:
        why = f"the last audited commit {since[:12]} is no longer in the repository"
        return Range(since=since, base=None, head=head, commits=tuple(reversed(commits)), rewritten=why, truncated=truncated)
    if repo.git.descendant_of(head, since):  # reached through a merge's second parent, or too far back
        base: str | None = since
        why = None
    else:
        why = f"the tip {head[:12]} does not descend from the last audited commit {since[:12]}"
        try:
            found = repo.git.merge_base(head, since)
        except (pygit2.GitError, KeyError, ValueError):
            found = None
        base = str(found) if found is not None else None
    commits, _, truncated = _first_parents(repo, head, base, limit)
    return Range(since=since, base=base, head=head, commits=tuple(reversed(commits)), rewritten=why, truncated=truncated)


def _fields_of(repo: MemoryRepo, commit: pygit2.Commit | None, domain: Domain) -> dict[str, tuple[str, str]]:
    """field -> (value, path) over every readable file of the domain in `commit`."""
    found: dict[str, tuple[str, str]] = {}
    if commit is None:
        return found
    limit = repo.config.max_file_bytes  # a larger file is a `file.too_large` finding, never parsed
    if domain.prefix.endswith("/"):
        files = [(p, b.data.decode("utf-8", errors="replace")) for p, b in repo.files(commit, domain.prefix) if b.size <= limit]
    else:
        blob = repo.blob_at(commit.tree, domain.prefix)
        files = [(domain.prefix, blob.data.decode("utf-8", errors="replace"))] if blob is not None and blob.size <= limit else []
    for path, text in files:
        try:
            doc = frontmatter.parse(text)
        except FrontmatterRefused:
            continue
        for name, value in frontmatter.fields(doc).items():
            found.setdefault(name, (value, path))
    return found


class _Auditor:
    def __init__(self, repo: MemoryRepo, known: Collection[str]) -> None:
        self.repo = repo
        self.config = repo.config
        self.known = set(known)
        self.findings: list[Finding] = []
        self.paths = 0
        self.unread: set[tuple[str | None, str]] = set()  # (commit, path) of files named, not read

    def text_at(self, commit: pygit2.Commit | None, path: str, domain: Domain | None, sha: str) -> str | None:
        """`path`'s text in `commit`, or what stands for it: a file over `max_file_bytes` is
        named (`file.too_large`, once) and not read, a symlink is its target (`file.symlink`)."""
        if commit is None:
            return None
        blob = self.repo.blob_at(commit.tree, path)
        if blob is None:
            return None
        key = (str(commit.id), path)
        severity = domain.severity if domain else Severity.WARN
        if commit.tree[path].filemode == FileMode.LINK:
            target = blob.data[:512].decode("utf-8", errors="replace")
            if key not in self.unread and str(commit.id) == sha:
                self.add(severity, domain, path, sha, "file.symlink", f"{path} is a symbolic link to {target}; the memory tool writes only files")
            self.unread.add(key)
            return f"(a symbolic link to {target})\n"
        if blob.size > self.config.max_file_bytes:
            if key not in self.unread and str(commit.id) == sha:
                self.add(severity, domain, path, sha, "file.too_large",
                         f"{path} is {blob.size} bytes, more than a memory file holds ({self.config.max_file_bytes}); not read")
            self.unread.add(key)
            return f"({blob.size} bytes, not read)\n"
        return blob.data.decode("utf-8", errors="replace")

    def worktree_text(self, path: str, domain: Domain | None) -> str | None:
        """The work-tree text of `path` for an excerpt; a file that cannot be read (or is too
        large to) is a finding about that file."""
        severity = domain.severity if domain else Severity.WARN
        target = self.repo.workdir / path
        try:
            if not target.is_symlink() and target.is_file() and target.stat().st_size > self.config.max_file_bytes:
                return f"({target.stat().st_size} bytes, not read)\n"
            return self.repo.worktree_text(path)
        except (OSError, ValueError) as exc:
            self.add(severity, domain, path, None, "file.unreadable", f"{path} could not be read: {type(exc).__name__}: {exc}")
            return f"(could not be read: {type(exc).__name__})\n"

    def add(self, severity: Severity, domain: Domain | None, path: str, commit: str | None, rule: str, excerpt: str) -> None:
        self.findings.append(Finding(
            severity=severity, domain=domain.name if domain else "", path=path, commit=commit, rule=rule,
            excerpt=_clip(excerpt, self.config),
        ))

    def commit(self, commit: pygit2.Commit) -> None:
        sha = str(commit.id)
        parent = commit.parents[0] if commit.parents else None
        bypass = sha not in self.known
        touched: dict[str, Domain] = {}
        if bypass and commit.message:  # a commit made around the tool: its message is read as the files are
            for hit in injection.scan(commit.message):
                self.add(Severity.WARN, None, "", sha, hit.rule, f"commit message: {hit.excerpt}")
        for path, status in MemoryRepo.changed_paths(commit):
            self.paths += 1
            domain = self.config.domain_of(path)
            old, new = self.text_at(parent, path, domain, sha), self.text_at(commit, path, domain, sha)
            diff = unified(old, new, path, max_chars=self.config.excerpt_max_chars)
            severity = domain.severity if domain else Severity.WARN
            if bypass:
                self.add(
                    severity,
                    domain,
                    path,
                    sha,
                    "bypass.commit",
                    f"not made by the memory tool: {commit.message.splitlines()[0] if commit.message else ''}\n{diff}",
                )
            if domain is None:
                self.add(Severity.WARN, None, path, sha, "layout.unknown", diff)
            else:
                touched[domain.prefix] = domain
                self._file(domain, path, sha, status, old, new, diff)
            if old is not None and _read_only(old):
                self.add(Severity.HALT, domain, path, sha, "read_only.changed", diff)
        for domain in touched.values():
            if domain.fields and domain.mode in (Mode.EXPECTED_KEYS, Mode.KEY_FIELDS, Mode.STRUCTURAL):
                self._fields(domain, parent, commit)

    def _file(self, domain: Domain, path: str, sha: str, status: DeltaStatus, old: str | None, new: str | None, diff: str) -> None:
        if domain.mode == Mode.APPEND_ONLY:
            if new is None:
                self.add(Severity.WARN, domain, path, sha, "journal.deleted", diff)
                return
            if old is not None and not new.startswith(old.rstrip()):
                self.add(Severity.WARN, domain, path, sha, "journal.rewritten", diff)
            if old is None and not DATED.search(path.rsplit("/", 1)[-1]) and not path.endswith("/index.md"):
                self.add(Severity.LOG, domain, path, sha, "journal.undated", f"{path}: a journal file is named by its day, journal/YYYY-MM-DD.md")
        elif new is None:
            self.add(domain.severity, domain, path, sha, "file.deleted", diff)
            return
        if new is not None and (sha, path) not in self.unread:
            try:
                frontmatter.validate(new)
            except FrontmatterRefused as exc:
                self.add(domain.severity, domain, path, sha, "frontmatter.invalid", f"{exc}\n{diff}")
            # the whole file after the change, and its name; a hit the file had before was reported then
            before = set(injection.scan(f"{path}\n{old}")) if old is not None else set()
            for hit in injection.scan(f"{path}\n{new}"):
                if hit not in before:
                    self.add(domain.severity, domain, path, sha, hit.rule, f"{path}: {hit.excerpt}")

    def _fields(self, domain: Domain, parent: pygit2.Commit | None, commit: pygit2.Commit) -> None:
        sha = str(commit.id)
        before, after = _fields_of(self.repo, parent, domain), _fields_of(self.repo, commit, domain)
        raised = False
        for name in domain.fields:
            if name not in after:
                if name in before or parent is None:
                    where = before[name][1] if name in before else domain.prefix
                    self.add(domain.severity, domain, where, sha, "fields.missing", f"the {domain.name} domain no longer has its '{name}' field")
                    raised = True
            elif domain.mode != Mode.EXPECTED_KEYS and name in before and before[name][0] != after[name][0]:
                excerpt = f"field '{name}' changed\n" + unified(
                    before[name][0] + "\n", after[name][0] + "\n", after[name][1], max_chars=self.config.excerpt_max_chars
                )
                self.add(domain.severity, domain, after[name][1], sha, "fields.changed", excerpt)
                raised = True
        if domain.mode == Mode.STRUCTURAL and not raised:
            for path, _ in MemoryRepo.changed_paths(commit):
                if domain.holds(path):
                    diff = unified(self.text_at(parent, path, domain, sha), self.text_at(commit, path, domain, sha), path,
                                   max_chars=self.config.excerpt_max_chars)
                    self.add(domain.other_changes, domain, path, sha, "domain.changed", diff)

    def worktree(self) -> int:
        changes = self.repo.changes()
        head = self.repo.head()
        tip = self.repo.commit(head) if head is not None else None
        for change in changes:
            self.paths += 1
            domain = self.config.domain_of(change.path)
            severity = domain.severity if domain else Severity.WARN
            diff = unified(
                self.text_at(tip, change.path, domain, ""), self.worktree_text(change.path, domain), change.path,
                max_chars=self.config.excerpt_max_chars,
            )
            self.add(
                severity, domain, change.path, None, f"worktree.{change.state}", f"{change.state} outside the memory tool, not committed\n{diff}"
            )
        if not self.repo.head_attached():
            self.add(
                Severity.HALT,
                None,
                "",
                None,
                "history.head_moved",
                f"HEAD is not {self.repo.branch_ref}: the work tree is not the memory the agent reads",
            )
        return len(changes)


def _read_only(text: str) -> bool:
    try:
        return frontmatter.parse(text).read_only
    except FrontmatterRefused:
        return False


def _is_bootstrap(repo: MemoryRepo, commit: pygit2.Commit) -> bool:
    return not commit.parents and commit.tree.id == repo.bootstrap_tree()


def audit(repo: MemoryRepo, scope: Range, known: Collection[str], operator: Collection[str] = ()) -> Audit:
    """Audit `scope` (from `pending`) and the work tree. `known`: the commits the memory tool
    recorded (`memory_writes`); every other commit is a bypass. `operator`: commits a human made
    through the CLI (a revert), which are not audited: a human acting is what a finding asks for."""
    auditor = _Auditor(repo, known)
    config = repo.config
    if scope.rewritten:
        auditor.add(Severity.HALT, None, "", scope.head, "history.rewritten", f"history rewritten: {scope.rewritten}")
    if scope.truncated:
        auditor.add(
            Severity.HALT, None, "", scope.head, "audit.too_many_commits",
            f"more than {config.max_commits_per_audit} commits since the last audit; only the newest {config.max_commits_per_audit} were read",
        )
    for sha in scope.commits:
        commit = repo.commit(sha)
        if sha in operator or scope.since is None and _is_bootstrap(repo, commit):
            continue
        auditor.commit(commit)
    changes = auditor.worktree()
    findings = sorted(auditor.findings, key=lambda f: -f.severity.rank)
    dropped = 0
    if len(findings) > config.max_findings_per_audit:
        keep = config.max_findings_per_audit - 1
        dropped = len(findings) - keep
        worst = findings[keep].severity
        findings = [*findings[:keep], Finding(
            severity=worst, domain="", path="", commit=scope.head, rule="audit.truncated",
            excerpt=_clip(f"{dropped} more findings were not recorded; read the history from {scope.base or 'the root'} to {scope.head}", config),
        )]
    by_severity = {s.value: sum(1 for f in findings if f.severity == s) for s in Severity}
    return Audit(
        range=scope, findings=tuple(findings), worktree_changes=changes, paths_checked=auditor.paths, dropped=dropped, by_severity=by_severity
    )
