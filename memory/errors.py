"""The refusals of the memory layer. Each names the rule that refused, so a caller (the tool, the
CLI) can print one clear line and a test can assert on the rule rather than on wording."""

from __future__ import annotations


class MemoryRefused(Exception):
    """A read or write the memory rules do not allow. `rule` is a stable dotted name
    (`path.dotdot`, `frontmatter.description`, ...); the message says what to fix."""

    def __init__(self, rule: str, message: str) -> None:
        self.rule = rule
        super().__init__(f"{message} [{rule}]")


class PathRefused(MemoryRefused):
    """The path is not one memory may hold: absolute, `..`, a symlink, `.git`, outside the layout."""


class FrontmatterRefused(MemoryRefused):
    """The content's frontmatter breaks a rule: no description, malformed YAML, a read-only file."""


class ContentRefused(MemoryRefused):
    """The content itself is refused: too large, not UTF-8 text, or an edit the tool does not make."""


class NotFound(MemoryRefused):
    """No such file, directory or commit in the memory repository."""


class Busy(MemoryRefused):
    """The repository's lock was held longer than the configured timeout."""
