"""Where a session's base temporary directory lives when the suite runs as root.

pytest keeps every session's directories under `<tmp>/pytest-of-<user>` and sets that directory
back to 0700 at the start of every session. Running as root, the embedded PostgreSQL runs as
pgserver's own user, which reaches its data directory only through the traversal bits pgserver
opened on every directory above it: a second pytest session as root (another run, another
project's, a bench) closed them again, and the running suite's servers lost their data and
stopped. So a root session that was not given `--basetemp` gets one under a directory of its own,
`<tmp>/wake-tests-of-root/run-<pid>-<n>/t`, that no pytest session changes the mode of; the newest
`KEEP` runs stay for debugging, older ones whose process is gone are removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import psutil

ROOT_NAME = "wake-tests-of-root"
KEEP = 3


def root_dir() -> Path:
    return Path(tempfile.gettempdir()) / ROOT_NAME


def _pid_of(run: Path) -> int | None:
    parts = run.name.split("-")
    return int(parts[1]) if len(parts) == 3 and parts[0] == "run" and parts[1].isdigit() else None


def prune(root: Path, keep: int = KEEP) -> list[Path]:
    """Remove the runs under `root` beyond the newest `keep` whose process has ended; returns them."""
    runs = sorted((p for p in root.iterdir() if _pid_of(p) is not None), key=lambda p: p.stat().st_mtime, reverse=True)
    removed = []
    for run in runs[keep:]:
        pid = _pid_of(run)
        if pid is not None and psutil.pid_exists(pid):
            continue
        shutil.rmtree(run, ignore_errors=True)
        removed.append(run)
    return removed


def for_root_session() -> Path:
    """A fresh base temporary directory for this root session (pytest creates the last part)."""
    root = root_dir()
    root.mkdir(mode=0o711, exist_ok=True)
    if root.is_symlink() or root.stat().st_uid != 0:
        raise RuntimeError(f"{root} is not root's own directory; remove it or pass --basetemp")
    with contextlib.suppress(OSError):
        prune(root)
    for n in range(1000):
        run = root / f"run-{os.getpid()}-{n}"
        try:
            run.mkdir(mode=0o711)
        except FileExistsError:
            continue
        return run / "t"
    raise RuntimeError(f"no free run directory under {root}")
