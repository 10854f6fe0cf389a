"""The memory layer's settings: plain frozen dataclasses, built by whoever loads the config.

The defaults are the Cloister domains: what each part of the layout is expected to hold, how
closely a change to it is checked, and how loudly a deviation is raised.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.StrEnum):
    """HALT: the agent's next wakes make no model call and bind no writing tool until a human
    acts. WARN: shown in the `cloister` arrival block until acknowledged. LOG: recorded only."""

    HALT = "HALT"
    WARN = "WARN"
    LOG = "LOG"

    @property
    def rank(self) -> int:
        return {"LOG": 0, "WARN": 1, "HALT": 2}[self.value]


class Mode(enum.StrEnum):
    """How closely the canary checks a change inside a domain (weakest to strongest)."""

    FRONTMATTER = "frontmatter"  # the frontmatter is valid; nothing else
    EXPECTED_KEYS = "expected_keys"  # ... and every expected field is present
    KEY_FIELDS = "key_fields"  # ... and no expected field changed its value
    STRUCTURAL = "structural"  # ... and every other change in the domain is reported as well
    APPEND_ONLY = "append_only"  # a file only grows at its end; its entries are dated


@dataclass(frozen=True, kw_only=True)
class Domain:
    """A part of the layout. `prefix` is a directory (ending in `/`) or one file."""

    name: str
    prefix: str
    fields: tuple[str, ...] = ()
    mode: Mode = Mode.FRONTMATTER
    severity: Severity = Severity.LOG
    # STRUCTURAL only: the severity of a change that leaves every expected field as it was
    other_changes: Severity = Severity.WARN

    def holds(self, path: str) -> bool:
        return path.startswith(self.prefix) if self.prefix.endswith("/") else path == self.prefix


DEFAULT_DOMAINS: tuple[Domain, ...] = (
    Domain(name="persona", prefix="system/persona/", fields=("identity", "principles", "scope"),
           mode=Mode.STRUCTURAL, severity=Severity.HALT, other_changes=Severity.WARN),
    Domain(name="human", prefix="system/human/", fields=("identity", "prefs"),
           mode=Mode.KEY_FIELDS, severity=Severity.HALT),
    Domain(name="project", prefix="system/project/", fields=("architecture", "conventions"),
           mode=Mode.KEY_FIELDS, severity=Severity.WARN),
    Domain(name="state", prefix="system/state.md", fields=("phase", "focus"),
           mode=Mode.EXPECTED_KEYS, severity=Severity.WARN),
    Domain(name="reference", prefix="reference/", mode=Mode.FRONTMATTER, severity=Severity.LOG),
    Domain(name="journal", prefix="journal/", mode=Mode.APPEND_ONLY, severity=Severity.LOG),
)

# Defaults, named: a memory file is a note, not a data set; a diff excerpt is a glance, not the diff.
MAX_FILE_BYTES = 64 * 1024
MAX_PATH_CHARS = 200
EXCERPT_MAX_CHARS = 600
LOCK_TIMEOUT_S = 10.0
# More new commits than this since the last audit is itself a HALT: nothing a wake does makes them.
MAX_COMMITS_PER_AUDIT = 2000
MAX_FINDINGS_PER_AUDIT = 200
SEARCH_MAX_HITS = 50


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    domains: tuple[Domain, ...] = DEFAULT_DOMAINS
    # prefixes (directories ending in `/`, or files) a write may use besides the domains'
    allowed_paths: tuple[str, ...] = ()
    max_file_bytes: int = MAX_FILE_BYTES
    max_path_chars: int = MAX_PATH_CHARS
    excerpt_max_chars: int = EXCERPT_MAX_CHARS
    lock_timeout_s: float = LOCK_TIMEOUT_S
    max_commits_per_audit: int = MAX_COMMITS_PER_AUDIT
    max_findings_per_audit: int = MAX_FINDINGS_PER_AUDIT
    search_max_hits: int = SEARCH_MAX_HITS
    # the committer of every commit the tool makes (the author is the agent)
    committer_name: str = "wake"
    committer_email: str = "wake@wake.invalid"
    branch: str = "main"
    # The text a new repository's persona starts from (the operator's persona files); '' leaves
    # every persona field "(not written yet)". Part of the bootstrap tree, so the canary knows it.
    persona_seed: str = ""

    def domain_of(self, path: str) -> Domain | None:
        """The most specific domain holding `path` (the longest prefix), or None."""
        holding = [d for d in self.domains if d.holds(path)]
        return max(holding, key=lambda d: len(d.prefix)) if holding else None

    def in_layout(self, path: str) -> bool:
        return self.domain_of(path) is not None or any(
            path.startswith(p) if p.endswith("/") else path == p for p in self.allowed_paths
        )
