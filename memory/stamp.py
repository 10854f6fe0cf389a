"""A stamp of a memory repository's work tree: what says, without asking git, that nothing moved.

`MemoryRepo.changes` (the work-tree status the canary reads at every wake) remembers the stamp
taken before a status that found the tree clean, and skips the status while the stamp is the same.
The stamp holds the branch's tip, the `stat` of `.git/index` and `.git/HEAD`, and, for every
entry under the work tree but `.git` (files, directories, symlinks, ignored ones included), its
path, mode, inode, size, and modification and change times in nanoseconds. So it moves with any
change git's status could see:

- a file edited (its size or mtime; with the mtime put back by `os.utime`, the ctime, which no
  system call sets back), replaced (the inode), added or removed (the path, its directory's times),
  or made a symlink (the mode);
- a commit or a `git add` by hand (the tip, the index);
- HEAD moved (its file).

Racy edits: a file changed twice within one tick of the file system's clock can keep its times.
A stamp in which anything changed less than `RACY_NS` before the stamp was taken is never trusted
(`take` returns None), so the status runs until the tree has been still that long; git calls this
the "racily clean" entry and re-reads such files for the same reason.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

RACY_NS = 2_000_000_000  # far longer than any file system's timestamp tick

_now_ns = time.time_ns  # the tests move it on, as if the tree had been still for a while

Entry = tuple[str, int, int, int, int, int]  # path, mode, inode, size, mtime_ns, ctime_ns
Stamp = tuple[str | None, tuple[Entry, ...]]


def _entry(path: str, st: os.stat_result) -> Entry:
    return (path, st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def take(workdir: Path, git_dir: Path, head: str | None) -> Stamp | None:
    """The stamp of the work tree at `workdir` with the branch's tip `head`, or None when it is
    not to be trusted: something in it changed within `RACY_NS`, or it could not be read."""
    now = _now_ns()
    entries: list[Entry] = []
    try:
        for name in ("index", "HEAD"):
            try:
                entries.append(_entry(f".git/{name}", os.stat(os.path.join(git_dir, name))))
            except FileNotFoundError:
                entries.append((f".git/{name}", 0, 0, 0, 0, 0))
        root = str(workdir)
        entries.append(_entry("", os.stat(root, follow_symlinks=False)))
        stack = [(root, "")]
        while stack:
            directory, prefix = stack.pop()
            with os.scandir(directory) as found:
                for item in found:
                    if not prefix and item.name == ".git":
                        continue
                    st = item.stat(follow_symlinks=False)
                    entries.append(_entry(prefix + item.name, st))
                    if item.is_dir(follow_symlinks=False):
                        stack.append((item.path, f"{prefix}{item.name}/"))
    except OSError:
        return None
    if any(now - max(e[4], e[5]) < RACY_NS for e in entries):
        return None
    return head, tuple(sorted(entries))
