"""Real git repositories for workspace tests: write files, commit them with pygit2."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

_SIG = pygit2.Signature("wake tests", "tests@localhost", 1_700_000_000, 0)


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body, encoding="utf-8")


def commit(root: Path, files: dict[str, str | bytes] | None = None, *, message: str = "commit",
           remove: tuple[str, ...] = ()) -> str:
    """Write `files`, delete `remove`, and commit everything in the working tree; the new HEAD."""
    repo = pygit2.init_repository(str(root)) if not (root / ".git").exists() else pygit2.Repository(str(root))
    write(root, files or {})
    for rel in remove:
        os.remove(root / rel)
    repo.index.read()
    repo.index.add_all()
    for rel in remove:
        repo.index.remove(rel)
    repo.index.write()
    tree = repo.index.write_tree()
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", _SIG, _SIG, message, tree, parents))


def blob_path(root: Path, rel: str) -> Path:
    """The loose object file holding `rel`'s blob at HEAD (to make it unreadable)."""
    repo = pygit2.Repository(str(root))
    oid = str(repo.revparse_single(f"HEAD:{rel}").id)
    return root / ".git" / "objects" / oid[:2] / oid[2:]
