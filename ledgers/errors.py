"""The errors of `ledgers`, each in one place (docs/design.md, "Typed values"): one base class,
`LedgerError`, and every error class of the package under it. The modules that raise them import
them from here, and re-export them under their old names."""

from __future__ import annotations

import uuid
from collections.abc import Sequence


class LedgerError(Exception):
    """An error of the ledgers: an id, a fence, a schema, a record's input, the graph."""


class CommitmentError(LedgerError, ValueError):
    """A commitment cannot be changed as asked; nothing was written."""


class MessageRefused(LedgerError, ValueError):
    """A message that cannot be stored as it is: empty, too long, or holding a NUL."""


class FactCheckError(LedgerError, ValueError):
    """A check cannot be recorded as asked; nothing was written."""


class FactError(LedgerError, ValueError):
    """A fact cannot be written as asked; the message says why and nothing was written."""


class StaleFence(LedgerError):
    """A write was attempted under a fence older than the agent's newest one."""

    def __init__(self, agent_id: str, fence: int, newest: int | None) -> None:
        self.agent_id, self.fence, self.newest = agent_id, fence, newest
        super().__init__(f"stale fence for agent {agent_id!r}: this wake holds {fence}, the newest is {newest}")


class GraphUnavailable(LedgerError):
    """Neo4j could not answer: unreachable, session expired, or timed out."""

    def __init__(self, address: str, reason: str) -> None:
        self.address, self.reason = address, reason
        super().__init__(f"neo4j unreachable at {address}: {reason}")


class GraphStaleFence(StaleFence):
    """The agent's Fence node in the graph holds a newer fence than this write's."""


class IdLookupError(LedgerError, LookupError):
    """An id or prefix that cannot name one row; the message says why in one line."""


class RetractionInputError(LedgerError, ValueError):
    """A retraction or a verdict was refused; the message says which field and why."""


class SchemaMismatch(LedgerError):
    """The database's migrations disagree with the files this code ships."""


class AlreadyClosed(CommitmentError):
    """The commitment was closed before."""


class AmbiguousPrefix(IdLookupError):
    """Several rows share the prefix."""

    def __init__(self, what: str, prefix: str, matches: Sequence[uuid.UUID], total: int) -> None:
        self.prefix = prefix
        self.matches = list(matches)
        self.total = total
        more = f", and {total - len(self.matches)} more" if total > len(self.matches) else ""
        super().__init__(f"{prefix!r} matches {total} {what}s: {', '.join(map(str, self.matches))}{more}"
                         " (give more of the id)")


class BadPrefix(IdLookupError):
    """Not the start of a uuid's text form, or fewer than `MIN_PREFIX_HEX` hex digits."""
