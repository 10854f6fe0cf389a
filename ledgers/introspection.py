"""`wake_introspection_ledger`: one row per wake attempt — what it saw, what it held, how it ended."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import asyncpg

from ledgers import ids, queries
from ledgers.fences import StaleFence
from ledgers.vocab import SETTLED


@dataclass(frozen=True, kw_only=True)
class WakeRow:
    """What the cycle writes when it records a wake (docs/design.md, step 7)."""

    wake_id: uuid.UUID
    agent_id: str
    tier: str
    trigger: str
    scheduled_for: dt.datetime | None
    started_at: dt.datetime
    manifest_root: str | None
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool_hashes: dict[str, str] = field(default_factory=dict)
    registry_tool_count: int = 0
    fence: int | None = None
    host: str
    pid: int
    version: str
    config_hash: str
    diff: dict[str, Any] | None = None
    note: str | None = None
    error: str | None = None
    escalation_cause: str | None = None
    # {sha256: (kind, body)}: the block texts and tool declarations behind the hashes, stored once
    # in `manifest_contents`; and the block names in prompt order
    contents: dict[str, tuple[str, str]] = field(default_factory=dict)
    arrival_order: list[str] = field(default_factory=list)

    @property
    def active_tool_names(self) -> list[str]:
        return sorted(self.tool_hashes)


_sql = queries.named("introspection")


async def insert(
    conn: asyncpg.Connection, row: WakeRow, *, status: str = "started", thinking: Thinking | None = None,
) -> str | None:
    """Write the row and the contents behind its hashes; a row written settled (with `thinking`,
    its totals, when a wake ended before any model call) is linked into the agent's chain at once.
    Returns its chain link (None while `started`)."""
    if thinking is not None and (linked := await _insert_settled_linked(conn, row, status, thinking)) is not None:
        return linked
    async with _transaction(conn):
        if thinking is None:
            await conn.execute(_sql("insert"), *_insert_args(row, status))
        elif not await _insert_settled(conn, row, status, thinking):
            raise StaleFence(row.agent_id, row.fence or 0, None)
        await store_contents(conn, row.contents)
        return None if status == "started" else await link(conn, row.agent_id, row.wake_id)


async def settle(
    conn: asyncpg.Connection, wake_id: uuid.UUID, status: str, *, note: str | None = None, error: str | None = None, agent_id: str | None = None,
    thinking: Thinking | None = None,
) -> str | None:
    """Close a started row (with the loop's totals when `thinking` is given: one statement) and
    link it into the agent's chain; returns the link, or None if the row was not open (already
    settled by someone else). The caller's transaction checks the fence."""
    if status not in SETTLED:
        raise ValueError(f"unknown status {status!r}")
    async with _transaction(conn):
        if agent_id is None:
            agent_id = (await get(conn, wake_id) or {}).get("agent_id")
            if agent_id is None:
                return None
        if not await _settle_row(conn, wake_id, agent_id, None, status, note=note, error=error, thinking=thinking):
            return None
        return await link(conn, agent_id, wake_id)


# -- the content store -------------------------------------------------------------------------


async def store_contents(conn: asyncpg.Connection, contents: dict[str, tuple[str, str]]) -> None:
    """Store each body once under its SHA-256 (the caller computed the keys)."""
    if contents:
        keys = sorted(contents)
        await conn.execute(_sql("store_contents"), keys, [contents[k][0] for k in keys], [contents[k][1] for k in keys])


async def contents(conn: asyncpg.Connection, hashes: list[str]) -> dict[str, tuple[str, str]]:
    """{sha256: (kind, body)} for the hashes that are stored."""
    return {r["sha256"]: (r["kind"], r["body"]) for r in await conn.fetch(_sql("contents"), hashes)}


async def arrival(conn: asyncpg.Connection, wake_id: uuid.UUID) -> list[tuple[str, str | None]]:
    """The blocks a wake saw, in prompt order: (name, text), text None where it is not stored."""
    row = await conn.fetchrow(_sql("arrival_order"), wake_id)
    if row is None:
        return []
    blocks = json.loads(row["blocks"]) if isinstance(row["blocks"], str) else row["blocks"]
    names = list(row["arrival_order"]) or sorted(blocks)
    stored = await contents(conn, [blocks[n]["hash"] for n in names if n in blocks])
    return [(n, stored[blocks[n]["hash"]][1] if n in blocks and blocks[n]["hash"] in stored else None) for n in names]


# -- the hash chain ----------------------------------------------------------------------------

GENESIS = "0" * 64


def chain_of(previous: str, root: str | None) -> str:
    """One link: sha256(previous link || manifest root), both as hex text; a row without a
    manifest contributes the empty string."""
    return hashlib.sha256((previous + (root or "")).encode("ascii")).hexdigest()


async def link(conn: asyncpg.Connection, agent_id: str, wake_id: uuid.UUID) -> str | None:
    """Link a settled row into the agent's chain, inside the caller's transaction (the settle's,
    under its fence). The head row's lock makes links of one agent one at a time. None if the row
    is open or already linked."""
    if not conn.is_in_transaction():
        raise RuntimeError("introspection.link must run inside the settle's transaction")
    head = await conn.fetchrow(_sql("chain_head_lock"), agent_id, GENESIS, wake_id)
    if head is None or not head["linkable"]:
        return None
    seq, value = int(head["seq"]) + 1, chain_of(head["chain"], head["manifest_root"])
    if await conn.fetchval(_sql("chain_link"), wake_id, seq, value, agent_id) is None:
        return None
    return value


async def chain_head(conn: asyncpg.Connection, agent_id: str) -> tuple[int, str] | None:
    row = await conn.fetchrow(_sql("chain_head"), agent_id)
    return None if row is None else (int(row["seq"]), row["chain"])


async def chain_rows(conn: asyncpg.Connection, agent_id: str) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch(_sql("chain_rows"), agent_id)]


async def chain_agents(conn: asyncpg.Connection) -> list[str]:
    return [r["agent_id"] for r in await conn.fetch(_sql("chain_agents"))]


@dataclass(frozen=True, kw_only=True)
class ChainCheck:
    """`wake verify --chain` for one agent: rows walked, and the first break (None: intact)."""

    agent_id: str
    rows: int
    head: tuple[int, str] | None
    broken: dict[str, Any] | None = None
    why: str | None = None


def walk(agent_id: str, rows: list[dict[str, Any]], head: tuple[int, str] | None) -> ChainCheck:
    """Recompute every link from the first; name the first row whose link, number or place breaks."""
    previous, seq = GENESIS, 0
    for row in rows:
        if row["chain_seq"] != seq + 1:
            return ChainCheck(agent_id=agent_id, rows=len(rows), head=head, broken=row,
                              why=f"link {seq + 1} is missing: the row before this one was removed or renumbered")
        expected = chain_of(previous, row["manifest_root"])
        if row["chain"] != expected:
            return ChainCheck(agent_id=agent_id, rows=len(rows), head=head, broken=row,
                              why=f"its link is {row['chain']}, its root and the link before it give {expected}")
        previous, seq = row["chain"], row["chain_seq"]
    if head is not None and head != (seq, previous):
        return ChainCheck(agent_id=agent_id, rows=len(rows), head=head, broken=None,
                          why=f"the chain head is link {head[0]} {head[1]}, the rows end at link {seq} {previous}")
    return ChainCheck(agent_id=agent_id, rows=len(rows), head=head)


@dataclass(frozen=True, kw_only=True)
class Thinking:
    """Steps 8-9 as the row stores them."""

    model: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    refusals: int = 0
    stop_reason: str | None = None


async def record_thinking(conn: asyncpg.Connection, wake_id: uuid.UUID, t: Thinking) -> bool:
    """Store the model loop's totals on a started row; False if the row is not open."""
    return await conn.fetchval(
        _sql("record_thinking"), wake_id, t.model, t.prompt_tokens, t.completion_tokens, t.cached_tokens,
        Decimal(str(round(t.cost_usd, 8))), t.turns, t.tool_calls, t.refusals, t.stop_reason,
    ) is not None


async def record_final_text(conn: asyncpg.Connection, wake_id: uuid.UUID, text: str) -> bool:
    return await conn.fetchval(_sql("record_final_text"), wake_id, text) is not None


async def record_unchecked_claims(conn: asyncpg.Connection, wake_id: uuid.UUID, count: int) -> bool:
    """The number of absence claims the final text made about blocks that could not be checked."""
    return await conn.fetchval(_sql("record_unchecked_claims"), wake_id, count) is not None


def _decode(record: asyncpg.Record | None) -> dict[str, Any] | None:
    return None if record is None else queries.decoded([record], ("blocks", "tool_hashes", "diff"))[0]


async def get(conn: asyncpg.Connection, wake_id: uuid.UUID) -> dict[str, Any] | None:
    return _decode(await conn.fetchrow(_sql("get"), wake_id))


async def resolve_id(conn: asyncpg.Connection, text: str) -> uuid.UUID | None:
    """A full wake id, or the one wake a prefix names; None when no wake has the prefix. Raises
    `ids.BadPrefix` for a prefix too short or not hex, `ids.AmbiguousPrefix` when several match."""
    try:
        return uuid.UUID(text)
    except ValueError:
        pass
    low, high = ids.prefix_range(text)
    rows = await conn.fetch(_sql("find_by_prefix"), low, high, ids.LISTED_MATCHES)
    return ids.unique(rows, what="wake", prefix=text, column="wake_id")


async def previous_settled(conn: asyncpg.Connection, agent_id: str, tier: str | None, before: dt.datetime) -> dict[str, Any] | None:
    """The agent's newest settled wake with a manifest started before `before` (of `tier`, if given)."""
    if tier is None:
        return _decode(await conn.fetchrow(_sql("previous_settled"), agent_id, before))
    return _decode(await conn.fetchrow(_sql("previous_settled_tier"), agent_id, tier, before))


async def previous_both(
    conn: asyncpg.Connection, agent_id: str, tier: str, before: dt.datetime,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """`previous_settled` of the agent and of its tier, in one round trip."""
    found: dict[str, dict[str, Any] | None] = {"agent": None, "tier": None}
    for record in await conn.fetch(_sql("previous_settled_both"), agent_id, tier, before):
        row = _decode(record)
        assert row is not None
        found[row.pop("previous_of")] = row
    return found["agent"], found["tier"]


def _insert_args(row: WakeRow, status: str) -> tuple[Any, ...]:
    return (
        row.wake_id, row.agent_id, row.tier, row.trigger, row.scheduled_for, status, row.started_at,
        row.manifest_root, json.dumps(row.blocks), len(row.tool_hashes), row.active_tool_names,
        json.dumps(row.tool_hashes), row.registry_tool_count, row.fence, row.host, row.pid,
        row.version, row.config_hash, json.dumps(row.diff) if row.diff is not None else None,
        row.note, row.error, row.escalation_cause, list(row.arrival_order),
    )


def _transaction(conn: asyncpg.Connection) -> contextlib.AbstractAsyncContextManager[Any]:
    """The caller's transaction when it holds one (the writes are its, and a savepoint would cost
    two round trips), else a new one."""
    return contextlib.nullcontext() if conn.is_in_transaction() else conn.transaction()


async def _insert_settled(conn: asyncpg.Connection, row: WakeRow, status: str, thinking: Thinking | None) -> bool:
    """Insert the row of a wake that called no model already settled (`status`, its totals), in
    one statement that checks `row.fence`; False when it is stale, and nothing was written."""
    if status not in SETTLED:
        raise ValueError(f"unknown status {status!r}")
    t = thinking or Thinking(model=None)
    return await conn.fetchval(
        _sql("insert_settled_fenced"), *_insert_args(row, status), t.model, t.prompt_tokens, t.completion_tokens, t.cached_tokens,
        Decimal(str(round(t.cost_usd, 8))), t.turns, t.tool_calls, t.refusals, t.stop_reason,
    ) is not None


async def _insert_settled_linked(conn: asyncpg.Connection, row: WakeRow, status: str, thinking: Thinking) -> str | None:
    """`insert_settled_linked`: the settled row, its contents and its link in one statement.
    Returns the link; None when the agent has no chain head yet (nothing was written: link it the
    slow way, which creates the head). Raises `StaleFence` when the fence is stale."""
    if status not in SETTLED:
        raise ValueError(f"unknown status {status!r}")
    t = thinking
    keys = sorted(row.contents)
    got = await conn.fetchrow(
        _sql("insert_settled_linked"), *_insert_args(row, status), t.model, t.prompt_tokens, t.completion_tokens, t.cached_tokens,
        Decimal(str(round(t.cost_usd, 8))), t.turns, t.tool_calls, t.refusals, t.stop_reason,
        keys, [row.contents[k][0] for k in keys], [row.contents[k][1] for k in keys],
    )
    assert got is not None
    if not got["heads"]:
        return None
    if not got["fenced"]:
        raise StaleFence(row.agent_id, row.fence or 0, None)
    if got["chain"] is None or got["moved"] != 1:
        raise RuntimeError(f"wake {row.wake_id}: the settled row was not linked into agent {row.agent_id!r}'s chain")
    return str(got["chain"])


async def _settle_row(
    conn: asyncpg.Connection, wake_id: uuid.UUID, agent_id: str, fence: int | None, status: str, *, note: str | None = None,
    error: str | None = None, thinking: Thinking | None = None,
) -> bool:
    """Close a started row, with the loop's totals, in one statement that checks the fence (None:
    not fenced); False when the row was not open or the fence is stale (nothing was written)."""
    if status not in SETTLED:
        raise ValueError(f"unknown status {status!r}")
    t = thinking or Thinking(model=None)
    return await conn.fetchval(
        _sql("settle_fenced"), wake_id, agent_id, fence, thinking is not None, status, note, error,
        t.model, t.prompt_tokens, t.completion_tokens, t.cached_tokens, Decimal(str(round(t.cost_usd, 8))), t.turns, t.tool_calls,
        t.refusals, t.stop_reason,
    ) is not None


async def recent(
    conn: asyncpg.Connection, *, agent_id: str | None = None, tier: str | None = None, status: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch(_sql("recent"), agent_id, tier, status, limit)]


async def last_two(conn: asyncpg.Connection, agent_id: str, tier: str | None = None, *, across_tiers: bool = False) -> list[uuid.UUID]:
    """The agent's last two settled wakes, newest first: of `tier` (None: the tier of its newest
    wake), or of any tier with `across_tiers`."""
    return [r["wake_id"] for r in await conn.fetch(_sql("last_two"), agent_id, tier, across_tiers)]


async def running(conn: asyncpg.Connection, agent_id: str) -> dict[str, Any] | None:
    """The agent's wake in progress (wake_id, tier, trigger, started_at, host, pid), or None."""
    row = await conn.fetchrow(_sql("running"), agent_id)
    return dict(row) if row is not None else None


async def abandon_started(conn: asyncpg.Connection, agent_id: str, reason: str) -> list[dict[str, Any]]:
    """Close every row of the agent still `started` as `abandoned`, each linked into the chain;
    call only under the agent's lease (its previous holder is gone). Returns the rows closed."""
    async with _transaction(conn):
        closed = [dict(r) for r in await conn.fetch(_sql("abandon_started"), agent_id, reason)]
        for row in closed:
            row["chain"] = await link(conn, agent_id, row["wake_id"])
    return closed


async def agents_with_started(conn: asyncpg.Connection) -> list[str]:
    return [r["agent_id"] for r in await conn.fetch(_sql("agents_with_started"))]
