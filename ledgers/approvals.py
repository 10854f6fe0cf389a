"""`tool_approvals`: calls of tools that require approval, from the wake that asked to the wake
that ran them (docs/approvals.md).

A call is queued `pending` by the model loop; an operator decides it once (`decide`: `approved`
or `rejected`, refused on any other state); the agent's next wake that can run it claims it
(`claim`, one conditional UPDATE in that wake's fenced transaction: `running`), and records what
it did (`finish`: `ran`, or `not_run` with why). A call left `running` by a wake of an older fence
is `interrupted` by the claim of the next one, never run again. A call still pending `ttl_s` after
it was asked is `expired` (`expire`, a decision of the harness, sealed as an operator's is, and
written here as every decision is): it never runs, and a decision on it is refused."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from ledgers import queries, rows

_sql = queries.named("approvals")

STATES = ("pending", "approved", "rejected", "running", "ran", "not_run", "interrupted", "expired")
OPEN = ("pending", "approved", "running")
DECISIONS = ("approved", "rejected")
EXPIRED_BY = "wake-expiry"  # who an expiry is decided by: the harness, not an operator
REASON_MAX = 2000  # characters of the model's reason kept
RESULT_MAX = 4000  # characters of a run call's answer kept on the row (the arrival shows a clip of it)


@dataclass(frozen=True, kw_only=True)
class Approval(rows.Row):
    """A row of `tool_approvals`."""

    json_columns = ("arguments",)

    id: int
    agent_id: str
    wake_id: uuid.UUID
    tier: str
    turn: int
    call_id: str
    tool: str
    tool_hash: str
    arguments: dict[str, object]
    reason: str
    reason_from: str
    requested_at: dt.datetime
    state: str
    decided_by: str | None
    decided_at: dt.datetime | None
    why: str | None
    run_wake_id: uuid.UUID | None
    run_fence: int | None
    claimed_at: dt.datetime | None
    outcome: str | None
    result: str | None
    finished_at: dt.datetime | None
    decision_seal: str | None = None  # the decision's seal (migration 0022), None while pending


@dataclass(frozen=True, kw_only=True)
class Claimed(Approval):
    """An approval a wake just claimed, and how many calls older wakes had left running (interrupted now)."""

    interrupted: int = 0
    sealed: bool = True  # its decision carries a valid seal: `wake approvals` wrote it


@dataclass(frozen=True, kw_only=True)
class Queued:
    """What `queue` did: the approval's id, and whether it is one that already waited for this call."""

    id: int
    existing: bool
    wake_id: uuid.UUID | None = None  # the wake that asked first, when `existing`
    requested_at: dt.datetime | None = None


def _arguments(arguments: dict[str, object]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


async def queue(
    conn: asyncpg.Connection, *, agent_id: str, wake_id: uuid.UUID, tier: str, turn: int, call_id: str, tool: str, tool_hash: str,
    arguments: dict[str, object], reason: str, reason_from: str, at: dt.datetime,
) -> Queued:
    """Record a call pending approval; the same call while one waits is that one (`existing`)."""
    text = _arguments(arguments)
    new = await conn.fetchval(
        _sql("queue"), agent_id, wake_id, tier, turn, call_id, tool, tool_hash, text, reason[:REASON_MAX], reason_from, at,
    )
    if new is not None:
        return Queued(id=int(new), existing=False)
    row = await conn.fetchrow(_sql("pending_call"), agent_id, tool, text)
    assert row is not None  # the conflict was with it, in this transaction's snapshot or committed before
    return Queued(id=int(row["id"]), existing=True, wake_id=row["wake_id"], requested_at=row["requested_at"])


async def expire(
    conn: asyncpg.Connection, *, agent_id: str | None, ttl_s: float, at: dt.datetime, approval_id: int | None = None,
) -> list[Approval]:
    """Expire the pending approvals asked `ttl_s` or more before `at` (with `agent_id`, only that
    agent's; with `approval_id`, only that one); the ones it expired."""
    rows = await conn.fetch(_sql("expire"), agent_id, approval_id, at, float(ttl_s), EXPIRED_BY)
    return [Approval.from_row(r) for r in rows]


async def decide(
    conn: asyncpg.Connection, approval_id: int, decision: str, *, by: str, at: dt.datetime, why: str | None, ttl_s: float,
    agent_id: str | None = None,
) -> Approval | None:
    """Decide a pending approval (with `agent_id`, only one of that agent's); None when it is not
    pending (decided before), is another agent's, does not exist, or was asked `ttl_s` or more
    before `at`: then it is expired first, in the same transaction, and stays so."""
    if decision not in DECISIONS:
        raise ValueError(f"not a decision: {decision!r}")
    async with conn.transaction():
        await expire(conn, agent_id=agent_id, ttl_s=ttl_s, at=at, approval_id=approval_id)
        row = await conn.fetchrow(_sql("decide"), approval_id, decision, by, at, why, agent_id, float(ttl_s))
    return Approval.from_row(row) if row is not None else None


async def one(conn: asyncpg.Connection, approval_id: int) -> Approval | None:
    row = await conn.fetchrow(_sql("one"), approval_id)
    return Approval.from_row(row) if row is not None else None


async def listed(
    conn: asyncpg.Connection, *, agent_id: str | None, include_closed: bool, limit: int, expired_since: dt.datetime | None = None,
) -> list[Approval]:
    """`wake approvals`: the open approvals and those expired at or after `expired_since` (or every
    one), newest first."""
    return [Approval.from_row(r) for r in await conn.fetch(_sql("listed"), agent_id, include_closed, limit, expired_since)]


async def claim(
    conn: asyncpg.Connection, *, agent_id: str, wake_id: uuid.UUID, tier: str, fence: int | None, at: dt.datetime, bound: Sequence[str],
) -> list[Claimed]:
    """Claim the agent's approved calls this wake can run; call inside the wake's fenced transaction."""
    return [Claimed.from_row(r) for r in await conn.fetch(_sql("claim"), agent_id, wake_id, tier, fence, at, list(bound))]


async def finish(
    conn: asyncpg.Connection, approval_id: int, wake_id: uuid.UUID, *, state: str, outcome: str | None, result: str, at: dt.datetime,
) -> bool:
    """Record what a claimed call did (`ran` with its outcome, or `not_run`); False when this wake
    no longer holds the claim."""
    if state not in ("ran", "not_run"):
        raise ValueError(f"not a finished state: {state!r}")
    return await conn.fetchval(_sql("finish"), approval_id, wake_id, state, outcome, result[:RESULT_MAX], at) is not None


async def for_arrival(conn: asyncpg.Connection, agent_id: str, wake_id: uuid.UUID, since: dt.datetime) -> list[Approval]:
    """The rows the `approvals` block shows (the named query says which)."""
    return [Approval.from_row(r) for r in await conn.fetch(_sql("for_arrival"), agent_id, wake_id, since)]


@dataclass(frozen=True, kw_only=True)
class Unsealed:
    """A decided approval whose decision has no valid seal: it was not written by `wake approvals`."""

    id: int
    agent_id: str
    tool: str
    state: str
    decided_by: str


async def unsealed(conn: asyncpg.Connection, agent_id: str | None) -> list[Unsealed]:
    """Decided approvals whose decision's seal is missing or wrong (`wake verify --chain`)."""
    return [Unsealed(**dict(r)) for r in await conn.fetch(_sql("unsealed"), agent_id)]
