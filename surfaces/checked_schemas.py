"""The tool schemas that have passed the JSON Schema metaschema check, remembered between processes.

Checking a tool's parameters against the Draft 2020-12 metaschema is the slowest part of building
the registry (milliseconds a tool, and the import of jsonschema): a one-shot command (`wake up`)
paid it for every tool on every run. A schema that passed is remembered by a digest of its exact
content and of the jsonschema version that checked it, so the same schema under the same checker is
not checked again; a changed schema, a new tool or another jsonschema is checked as before, and a
schema that fails is never remembered. The file is a cache: unreadable or absent, everything is
checked; a lost write costs one more check. Within one process the registry also remembers what
passed (`surfaces.registry`), so a process that builds it again (the daemon on SIGHUP, a test
session) checks each schema once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

MAX_ENTRIES = 4096  # digests kept; past it the file starts again (tools come and go with MCP servers)


@functools.cache
def checker() -> str:
    """The check a digest vouches for: the metaschema and the jsonschema version that ran it."""
    return f"jsonschema {importlib.metadata.version('jsonschema')} Draft202012Validator.check_schema"


def digest(schema: Mapping[str, object]) -> str:
    """A schema's exact content under this checker."""
    text = json.dumps(schema, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(f"{checker()}\0{text}".encode()).hexdigest()


class CheckedSchemas:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._known: set[str] = set()
        self._added = False
        if path is not None:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                self._known = {line for line in path.read_text().split("\n") if len(line) == 64}

    def digest(self, schema: Mapping[str, object]) -> str:
        return digest(schema)

    def passed(self, schema: Mapping[str, object]) -> bool:
        return self.knows(digest(schema))

    def remember(self, schema: Mapping[str, object]) -> None:
        self.add(digest(schema))

    def knows(self, known: str) -> bool:
        """Whether the schema of this digest (`digest`) passed."""
        return known in self._known

    def add(self, known: str) -> None:
        """Remember that the schema of this digest passed."""
        if known not in self._known:
            if len(self._known) >= MAX_ENTRIES:
                self._known.clear()
            self._known.add(known)
            self._added = True

    def save(self) -> None:
        """Write the digests (atomically: a reader sees the old file or the new one)."""
        if self.path is None or not self._added:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".checked-schemas-")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w") as f:
                f.write("\n".join(sorted(self._known)) + "\n")
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        self._added = False
