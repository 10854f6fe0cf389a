"""Memory benchmark on real git repositories. Prints figures; it is not a timed test.

    python bench/memory.py [--files 1000] [--short 100] [--long 10000] [--writes 200] [--runs 30]

Builds two repositories with the same `--files` files, one with a history of `--short` commits
and one of `--long`, and in each makes the same change on top of an audited tip (ten tool
writes, one of them to the persona, one commit made behind the tool's back, one uncommitted
edit). Then it prints:

- the latency of a memory write and an append (p50, p99) in the long repository;
- the canary's time per wake (p50, p99 of `pending` + `audit`) in both: the figure to watch is
  that the long history costs no more than the short one, because the audit reads only what came
  after the last audited commit;
- the memory block's listing (`ls` of every file with its description), cold and warm.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pygit2
from pygit2.enums import CheckoutStrategy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory import cloister
from memory.config import MemoryConfig
from memory.repo import MemoryRepo, signature

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
TRAILERS = {"Wake-Id": "00000000-0000-0000-0000-000000000001", "Fence": "1", "Tier": "full"}
CHANGE_WRITES = 10


def _doc(description: str, body: str) -> str:
    return f"---\ndescription: {description}\n---\n{body}\n"


def _file(i: int) -> str:
    return f"reference/d{i % 40:02d}/note-{i:05d}.md"


def build(root: Path, files: int, commits: int) -> MemoryRepo:
    """A repository with `files` files and a history of `commits` commits, written straight to
    the object database (fast), then checked out: what the canary reads is the same."""
    repo = MemoryRepo.open(root, MemoryConfig(), at=NOW)
    git = repo.git
    parent = git[git.references[repo.branch_ref].target]
    assert isinstance(parent, pygit2.Commit)
    tree = parent.tree
    start = NOW - dt.timedelta(minutes=commits + 10)
    author = signature("ani", start)
    for i in range(max(commits - 1, 0)):
        author = signature("ani", start + dt.timedelta(minutes=i))  # a real history's times grow
        index = i % files if i < files or commits <= files else (i * 7919) % files
        text = _doc(f"note {index}", f"revision {i}\n" + "line of text\n" * 20)
        tree_id = repo._with_blob(tree, _file(index).split("/"), git.create_blob(text.encode()))
        assert tree_id is not None
        tree_obj = git[tree_id]
        assert isinstance(tree_obj, pygit2.Tree)
        tree = tree_obj
        commit_id = git.create_commit(
            None, author, author, f"memory write {_file(index)}: bench\n\nWake-Id: -\nFence: 1\nTier: full\n", tree.id, [parent.id]
        )
        parent_obj = git[commit_id]
        assert isinstance(parent_obj, pygit2.Commit)
        parent = parent_obj
    for index in range(files):  # every file exists, whatever the history's length
        if MemoryRepo.blob_at(tree, _file(index)) is None:
            tree_id = repo._with_blob(tree, _file(index).split("/"), git.create_blob(_doc(f"note {index}", "start").encode()))
            assert tree_id is not None
            tree_obj = git[tree_id]
            assert isinstance(tree_obj, pygit2.Tree)
            tree = tree_obj
    commit_id = git.create_commit(None, author, author, "memory write: fill\n\nWake-Id: -\nFence: 1\nTier: full\n", tree.id, [parent.id])
    git.references[repo.branch_ref].set_target(commit_id)
    git.checkout_tree(tree, strategy=CheckoutStrategy.FORCE)
    git.index.read_tree(tree)
    git.index.write()
    return MemoryRepo(pygit2.Repository(str(root)), MemoryConfig())


def change(repo: MemoryRepo) -> set[str]:
    """The same change in every repository: ten tool writes (one to the persona), one commit made
    behind the tool's back, one uncommitted edit. Returns the tool's commits."""
    known = set()
    persona = repo.read("system/persona/persona.md").text
    known.add(repo.write("system/persona/behavior.md", _doc("how I behave", "Be brief."), reason="b", author="ani", trailers=TRAILERS, at=NOW).commit)
    for i in range(CHANGE_WRITES - 1):
        known.add(repo.write(_file(i), _doc(f"note {i}", f"changed {i}"), reason="c", author="ani", trailers=TRAILERS, at=NOW).commit)
    (repo.workdir / "system" / "persona" / "persona.md").write_text(persona.replace("(not written yet)", "someone else", 1))
    repo.git.index.add("system/persona/persona.md")
    repo.git.index.write()
    tree = repo.git.index.write_tree()
    tip = repo.git[repo.git.references[repo.branch_ref].target]
    sig = signature("shell", NOW)
    commit = repo.git.create_commit(repo.branch_ref, sig, sig, "by hand", tree, [tip.id])
    assert commit not in known
    (repo.workdir / _file(500)).write_text("edited by hand")
    return known


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p99 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--short", type=int, default=100)
    parser.add_argument("--long", type=int, default=10_000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-memory-bench-") as tmp:
        repos = {}
        for label, commits in (("short", args.short), ("long", args.long)):
            started = time.perf_counter()
            repo = build(Path(tmp) / label, args.files, commits)
            built = time.perf_counter() - started
            since = repo.head()
            assert since is not None
            count = sum(1 for _ in repo.git.walk(repo.git.references[repo.branch_ref].target))
            repos[label] = (repo, since, change(repo), count)
            print(f"built the {label} repository: {args.files} files, {count} commits in {built:.1f} s")
        samples: dict[str, list[float]] = {"short": [], "long": []}
        audits: dict[str, cloister.Audit] = {}
        for run in range(args.runs + 1):  # interleaved, so both see the same machine; run 0 warms up
            for label, (repo, since, known, _) in repos.items():
                started = time.perf_counter()
                audits[label] = cloister.audit(repo, cloister.pending(repo, since), known)
                if run:
                    samples[label].append(time.perf_counter() - started)
        repo = repos["long"][0]
        writes, appends = [], []
        for i in range(args.writes):
            t0 = time.perf_counter()
            repo.write(_file(600 + i % 300), _doc(f"note {i}", f"bench write {i}"), reason="w", author="ani", trailers=TRAILERS, at=NOW)
            t1 = time.perf_counter()
            repo.append("journal/2026-11-29.md", f"entry {i}", reason="a", author="ani", trailers=TRAILERS, at=NOW)
            writes.append(t1 - t0)
            appends.append(time.perf_counter() - t1)
        fresh = MemoryRepo(pygit2.Repository(str(repo.workdir)), MemoryConfig())
        t0 = time.perf_counter()
        listed = fresh.ls()
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        fresh.ls()
        warm = time.perf_counter() - t0
        print()
        w50, w99 = percentiles(writes)
        a50, a99 = percentiles(appends)
        print(f"write  ({args.writes}, {repos['long'][3]}+ commits, {args.files} files): p50 {w50:6.2f} ms  p99 {w99:6.2f} ms")
        print(f"append ({args.writes}, one journal file growing):        p50 {a50:6.2f} ms  p99 {a99:6.2f} ms")
        print()
        print(f"canary per wake, the same change ({CHANGE_WRITES} tool writes + 1 bypass commit + 1 uncommitted edit), {args.runs} runs:")
        for label in ("short", "long"):
            count, result = repos[label][3], audits[label]
            p50, p99 = percentiles(samples[label])
            print(f"  history {count:6d} commits: p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
                  f"(read {len(result.range.commits)} commits, {result.paths_checked} paths; findings {result.by_severity})")
        ratio = statistics.median(samples["long"]) / statistics.median(samples["short"])
        print(f"  long / short (p50): {ratio:.2f}x  (1.0 = the cost does not grow with history)")
        print()
        print(f"memory block listing, {len(listed)} files with descriptions: cold {cold * 1000:.1f} ms, warm {warm * 1000:.1f} ms")


if __name__ == "__main__":
    main()
