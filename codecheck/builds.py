"""What the workspace and its build worker share: the build itself and its typed failure.

Both `codecheck.workspace` (which asks for builds) and `codecheck.build_worker` (the child process
that runs them) use this module; neither imports the other's side.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from codecheck.errors import WorkspaceError as WorkspaceError  # noqa: F401  (defined in codecheck/errors.py, imported from here too)
from codecheck.errors import WorkspaceTimeout as WorkspaceTimeout
from codecheck.fingerprint import Fingerprint

# (repository root, HEAD commit oid, the previous fingerprint or None) -> the fingerprint of HEAD
Builder = Callable[[Path, str, "Fingerprint | None"], "Fingerprint"]

# In whichever process builds: each repository's last fingerprint, with the summaries the next
# (incremental) build reuses. The caller gets the fingerprint without them.
_LAST_BUILT: dict[str, Fingerprint] = {}


def run_build(builder: Builder, root: str, head: str) -> tuple[Fingerprint, float]:
    """Build HEAD's fingerprint from this process's last one of `root`; (fingerprint, build ms)."""
    started = time.perf_counter()
    fp = builder(Path(root), head, _LAST_BUILT.get(root))
    _LAST_BUILT[root] = fp
    return dataclasses.replace(fp, cache={}, walk_cache={}), (time.perf_counter() - started) * 1000
