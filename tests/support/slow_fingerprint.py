"""A fingerprint builder that waits for the test to let it go: a named pipe is its event, so it
works in the build worker process too (a threading.Event cannot cross a process boundary)."""

from __future__ import annotations

from pathlib import Path

from codecheck import workspace
from codecheck.fingerprint import Fingerprint


def build_after(fifo: str, root: Path, head: str, previous: Fingerprint | None) -> Fingerprint:
    """Block until a byte arrives on `fifo` (opening it blocks until the test opens the other end)."""
    with open(fifo, "rb") as pipe:
        pipe.read(1)
    return workspace.build(root, head, previous)
