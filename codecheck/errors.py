"""The errors of `codecheck`, each in one place (docs/design.md, "Typed values"): one base class,
`CodeCheckError`, and every error class of the package under it. The modules that raise them import
them from here, and re-export them under their old names."""

from __future__ import annotations


class CodeCheckError(Exception):
    """An error of the code check: a workspace that cannot be read, a worker, an anchor."""


class AnchorError(CodeCheckError, ValueError):
    """An anchor is malformed; the message names it and says why."""


class WorkerDied(CodeCheckError):
    """The worker process ended or broke its protocol; the next request starts a new one."""


class WorkspaceError(CodeCheckError):
    """The workspace cannot be fingerprinted. `kind`: not_a_repository, no_commits, unreadable, over_budget."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class WorkspaceTimeout(WorkspaceError):
    """The fingerprint was not ready within the budget; it goes on building in the background."""

    def __init__(self, message: str) -> None:
        super().__init__("over_budget", message)
