"""Rendezvous (highest-random-weight) hashing: which live replica owns which agent.

Pure functions of the membership, kept apart from `wake.daemon.ownership` (which runs the
handovers and their catch-up over the stores) so that `wake status` can compute the owners without
importing the wake's machinery.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from wake.daemon import control


def weight(replica_id: str, agent_id: str) -> int:
    """The rendezvous weight of (replica, agent): the same on every replica, for all time."""
    return int.from_bytes(hashlib.blake2b(f"{replica_id}\0{agent_id}".encode(), digest_size=8).digest(), "big")


def owner_of(agent_id: str, members: Sequence[str]) -> str | None:
    """The member with the highest weight for `agent_id` (None with no member)."""
    return max(members, key=lambda r: (weight(r, agent_id), r)) if members else None


def assign(agents: Iterable[str], members: Sequence[str]) -> dict[str, str]:
    """Every agent's owner among `members` (empty with no member)."""
    if not members:
        return {}
    return {a: owner_of(a, members) or "" for a in agents}


def members_of(replicas: Iterable[control.ReplicaState]) -> tuple[str, ...]:
    """The membership the hashing runs over: live replicas that are not leaving, by id."""
    return tuple(sorted(r.replica_id for r in replicas if not r.leaving))
