"""Which paths memory may hold. A path is relative, `/`-separated, made of plain names, ends in
`.md`, stays out of `.git`, crosses no symlink in the work tree, and lies inside the layout (the
domains' prefixes and `allowed_paths`). Each refusal names its rule."""

from __future__ import annotations

import re
from pathlib import Path

from memory.config import MemoryConfig
from memory.errors import PathRefused

SUFFIX = ".md"
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")


def parts(path: str, *, max_chars: int) -> list[str]:
    """The components of a syntactically valid relative path (file or directory)."""
    if not path:
        raise PathRefused("path.empty", "the path is empty")
    if len(path) > max_chars:
        raise PathRefused("path.length", f"the path is {len(path)} characters long; at most {max_chars}")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise PathRefused("path.absolute", f"{path!r} is absolute; give a path inside memory, e.g. reference/notes.md")
    if _CONTROL.search(path):
        raise PathRefused("path.chars", f"{path!r} holds a backslash or a control character")
    names = path.split("/")
    if ".." in names:
        raise PathRefused("path.dotdot", f"{path!r} climbs out with '..'")
    if any(name.lower().startswith(".git") for name in names):
        raise PathRefused("path.git", f"{path!r} names git's own files (.git*), which memory never writes")
    if any(name in ("", ".") for name in names):
        raise PathRefused("path.chars", f"{path!r} has an empty or '.' component")
    return names


def directory(path: str, *, config: MemoryConfig) -> str:
    """A directory prefix for ls/search: '' (the root) or 'a/b/' (always with the slash)."""
    stripped = path.strip().strip("/")
    if not stripped or stripped == ".":
        return ""
    parts(stripped, max_chars=config.max_path_chars)
    return stripped + "/"


def file(path: str, *, config: MemoryConfig, workdir: Path | None = None) -> str:
    """A file path a write may use; `workdir` (the repository's work tree) is checked for symlinks."""
    names = parts(path, max_chars=config.max_path_chars)
    if not names[-1].endswith(SUFFIX) or names[-1] == SUFFIX:
        raise PathRefused("path.suffix", f"{path!r} is not a markdown file; memory files end in {SUFFIX}")
    if not config.in_layout(path):
        raise PathRefused(
            "layout.unknown",
            f"{path!r} is outside the memory layout ({', '.join(d.prefix for d in config.domains)}"
            f"{', ' + ', '.join(config.allowed_paths) if config.allowed_paths else ''})",
        )
    if workdir is not None:
        no_symlinks(workdir, names)
    return path


def no_symlinks(workdir: Path, names: list[str]) -> None:
    """Refuse when any existing component of the path in the work tree is a symlink (or the file
    is not a regular file), so a write can never land outside the repository."""
    here = workdir
    for index, name in enumerate(names):
        here = here / name
        if here.is_symlink():
            raise PathRefused("path.symlink", f"{'/'.join(names[: index + 1])!r} is a symlink in the memory work tree")
        if not here.exists():
            return
        if index < len(names) - 1 and not here.is_dir():
            raise PathRefused("path.kind", f"{'/'.join(names[: index + 1])!r} is a file, not a directory")
    if here.is_dir():
        raise PathRefused("path.kind", f"{'/'.join(names)!r} is a directory, not a file")
