"""Follow one wake through the code: which project files it stays in, in call order.

`traced()` records, with `sys.setprofile`, the first call of every function of the project's
packages (a coroutine's resumptions are not new calls) and the project function that called it;
`Path.of` walks that call tree depth first, so a call into another file is a stay there and the
caller's code after it a return to the caller's file. Modules that every step uses (logs, clock,
metrics, config, errors) are left out: they are not steps. `depth_under` folds everything below a
named function into it (the wake cycle's own steps, say), to read the path from fire to settle.

The figures (docs/design.md, "One wake"): stays, distinct files, returns to a file already left
(coming home from a call included), re-entries (calls into a file already visited: doubling
back), and climbs back up a layer (a call from a module into one of a higher layer: a callback).
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path as FilePath

ROOT = FilePath(__file__).resolve().parents[2]
PACKAGES = ("wake", "surfaces", "ledgers", "codecheck", "memory", "untrusted")
# Used by every step, so not a step of their own.
NOT_STEPS = ("wake/logs.py", "wake/clock.py", "wake/observe/", "wake/config/", "wake/errors.py", "wake/keys.py", "ledgers/errors.py")
# From the top: import-linter's layers (pyproject.toml), a module of a lower index above one of a higher.
LAYERS = (
    "wake/cli/", "wake/console/", "wake/daemon/", "wake/run/", "wake/think/", "wake/arrival/", "wake/witness/", "wake/context.py",
    "wake/stores/", "wake/observe/", "wake/", "surfaces/", "ledgers/", "codecheck/", "memory/", "untrusted/",
)


def layer(file: str) -> int:
    return next(i for i, prefix in enumerate(LAYERS) if file.startswith(prefix))


@dataclass
class _Call:
    file: str
    name: str
    children: list[_Call] = field(default_factory=list)


@dataclass
class Path:
    stays: list[str]
    climbs: list[tuple[str, str]]
    entries: dict[str, int] = field(default_factory=dict)  # calls into each file from another one

    @property
    def files(self) -> int:
        return len(set(self.stays))

    @property
    def returns(self) -> int:
        """Stays in a file the path had already left."""
        seen: set[str] = set()
        count = 0
        for file in self.stays:
            count += file in seen
            seen.add(file)
        return count

    def figures(self) -> dict[str, int]:
        return {"stays": len(self.stays), "files": self.files, "returns": self.returns, "reentries": self.reentries, "climbs": len(self.climbs)}

    @property
    def reentries(self) -> int:
        """Calls into a file the path had been in already: doubling back, not coming home from a call."""
        return sum(n - 1 for n in self.entries.values())

    @classmethod
    def of(cls, roots: list[_Call], fold: tuple[str, ...] = ()) -> Path:
        stays: list[str] = []
        climbs: list[tuple[str, str]] = []
        entries: dict[str, int] = {}

        def stay(file: str) -> None:
            if not stays or stays[-1] != file:
                stays.append(file)

        def walk(call: _Call) -> None:
            stay(call.file)
            if f"{call.file}:{call.name}" in fold:
                return
            for child in call.children:
                if child.file != call.file:
                    entries[child.file] = entries.get(child.file, 0) + 1
                if layer(child.file) < layer(call.file):
                    climbs.append((f"{call.file}:{call.name}", f"{child.file}:{child.name}"))
                walk(child)
                stay(call.file)

        for root in roots:
            entries[root.file] = entries.get(root.file, 0) + 1
            walk(root)
        return cls(stays=stays, climbs=climbs, entries=entries)


def _project_file(code: types.CodeType) -> str | None:
    try:
        rel = FilePath(code.co_filename).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None
    if not rel.startswith(PACKAGES) or rel.startswith(NOT_STEPS) or "<" in code.co_name:
        return None
    return rel


@contextlib.contextmanager
def traced(root_name: str) -> Iterator[list[_Call]]:
    """Record the calls under the first project function named `root_name` (and any later ones)."""
    roots: list[_Call] = []
    calls: dict[int, _Call] = {}  # id(frame) of every project frame seen, while it lives
    frames: dict[int, types.FrameType] = {}

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "return" and id(frame) in calls and frame.f_code.co_flags & 0x380 == 0:  # a plain function's end
            del calls[id(frame)], frames[id(frame)]
        if event != "call" or id(frame) in calls:
            return
        file = _project_file(frame.f_code)
        if file is None:
            return
        parent = frame.f_back
        while parent is not None and (id(parent) not in calls or frames.get(id(parent)) is not parent):
            parent = parent.f_back
        call = _Call(file=file, name=frame.f_code.co_qualname)
        if parent is not None:
            calls[id(parent)].children.append(call)
        elif frame.f_code.co_name == root_name:
            roots.append(call)
        else:
            return
        calls[id(frame)] = call
        frames[id(frame)] = frame

    sys.setprofile(profile)
    try:
        yield roots
    finally:
        sys.setprofile(None)


def outline(roots: list[_Call], fold: tuple[str, ...] = (), depth: int = 0) -> list[str]:
    """The call tree as indented `file:function` lines, `fold`ed calls not opened."""
    lines: list[str] = []
    for call in roots:
        lines.append(f"{'  ' * depth}{call.file}:{call.name}")
        if f"{call.file}:{call.name}" not in fold:
            lines.extend(outline(call.children, fold, depth + 1))
    return lines
