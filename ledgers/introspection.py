"""`wake_introspection_ledger`: one row per wake attempt — what it saw, what it held, how it ended.

What the cycle writes is a `WakeRow`; what a reader gets back is a record made where the SQL is
read (`WakeRecord.from_row`, `WakeSummary`, `ChainRow`, `AbandonedRow`), and the row's binding
diff is a `WakeDiff` of two `Diff`s, each a `ToolDiff` and a `BlockDiff`. The diff's JSON (the
`diff` column, `wake up --json`) is `as_json()`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Self

import asyncpg

from ledgers import ids, queries
from ledgers.errors import StaleFence
from ledgers.vocab import RAN, SETTLED, Status, Tier, Trigger

# A block's state as the row stores it, under its name (`wake.arrival.engine.Block.state`): hash,
# cache_tier, retrieval, result, reason, latency_ms, rows, and for a composed block its parts.
BlockStates = Mapping[str, Mapping[str, Any]]


# -- the binding diff --------------------------------------------------------------------------


def _names(value: Any) -> tuple[str, ...]:
    return tuple(value or ())


@dataclass(frozen=True, kw_only=True)
class ToolDiff:
    """The tools a wake holds against an earlier wake's, by declaration hash."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    held: int = 0

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.changed)


@dataclass(frozen=True, kw_only=True)
class BlockDiff:
    """The arrival blocks against an earlier wake's, by text hash and retrieval state."""

    changed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    newly_failing: tuple[str, ...] = ()
    recovered: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    # the order the JSON and `wake diff` list them in
    KINDS = ("changed", "unchanged", "newly_failing", "recovered", "added", "removed")

    def of(self, kind: str) -> tuple[str, ...]:
        names: tuple[str, ...] = getattr(self, kind)
        return names


@dataclass(frozen=True, kw_only=True)
class Against:
    """The earlier wake a diff compares with."""

    wake_id: str
    tier: str
    started_at: str  # ISO 8601, as the diff column keeps it


@dataclass(frozen=True, kw_only=True)
class Diff:
    """One wake against one earlier wake; `against` is None for a first wake (nothing to compare)."""

    against: Against | None = None
    tools: ToolDiff = ToolDiff()
    blocks: BlockDiff = BlockDiff()

    @property
    def first(self) -> bool:
        return self.against is None

    def as_json(self) -> dict[str, object]:
        """The diff as the row's `diff` column and `wake diff --json` hold it: JSON, so a dict."""
        if self.against is None:
            return {"first": True, "against": None}
        t, b = self.tools, self.blocks
        return {
            "first": False,
            "against": {"wake_id": self.against.wake_id, "tier": self.against.tier, "started_at": self.against.started_at},
            "tools": {"added": list(t.added), "removed": list(t.removed), "changed": list(t.changed), "held": t.held},
            "blocks": {k: list(b.of(k)) for k in BlockDiff.KINDS},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Self:
        if d.get("first", True) or d.get("against") is None:
            return cls()
        a, t, b = d["against"], d["tools"], d["blocks"]
        return cls(
            against=Against(wake_id=str(a["wake_id"]), tier=a["tier"], started_at=a["started_at"]),
            tools=ToolDiff(added=_names(t["added"]), removed=_names(t["removed"]), changed=_names(t["changed"]), held=int(t["held"])),
            blocks=BlockDiff(**{k: _names(b.get(k)) for k in BlockDiff.KINDS}),
        )


@dataclass(frozen=True, kw_only=True)
class WakeDiff:
    """The row's `diff`: against the agent's previous wake and against its tier's."""

    agent: Diff
    tier: Diff

    def as_json(self) -> dict[str, object]:
        """The row's `diff` column (and `wake up --json`'s): JSON, so a dict."""
        return {"agent": self.agent.as_json(), "tier": self.tier.as_json()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Self | None:
        if not d:
            return None
        return cls(agent=Diff.from_json(d["agent"]), tier=Diff.from_json(d["tier"]))


@dataclass(frozen=True, kw_only=True)
class WakeRow:
    """What the cycle writes when it records a wake (docs/design.md, step 8)."""

    wake_id: uuid.UUID
    agent_id: str
    tier: Tier
    trigger: Trigger
    scheduled_for: dt.datetime | None
    started_at: dt.datetime
    manifest_root: str | None = None
    blocks: BlockStates = field(default_factory=dict)
    tool_hashes: Mapping[str, str] = field(default_factory=dict)
    registry_tool_count: int = 0
    fence: int | None = None
    host: str
    pid: int
    version: str
    config_hash: str
    diff: WakeDiff | None = None
    note: str | None = None
    error: str | None = None
    escalation_cause: str | None = None
    # {sha256: (kind, body)}: the block texts and tool declarations behind the hashes, stored once
    # in `manifest_contents`; and the block names in prompt order
    contents: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    arrival_order: Sequence[str] = ()
    trace_id: str | None = None  # the OpenTelemetry trace of the wake's spans (32 hex digits), when it was traced

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
    if thinking is not None:
        return (await insert_settled(conn, row, status=status, thinking=thinking)).chain
    return await _insert_slow(conn, row, status, None)


@dataclass(frozen=True, kw_only=True)
class Settled:
    """A row written settled: its chain link, and whether its tier had an open incident as it was
    written (None: not read, the row went the slow way)."""

    chain: str | None
    incidents_open: bool | None


async def insert_settled(conn: asyncpg.Connection, row: WakeRow, *, status: str, thinking: Thinking) -> Settled:
    """`insert` of a row written settled: one statement (`insert_settled_linked`) once the agent
    has a chain head, which also reads whether the tier has an open incident."""
    linked = await _insert_settled_linked(conn, row, status, thinking)
    if linked is not None:
        return linked
    return Settled(chain=await _insert_slow(conn, row, status, thinking), incidents_open=None)


async def _insert_slow(conn: asyncpg.Connection, row: WakeRow, status: str, thinking: Thinking | None) -> str | None:
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
            found = await get(conn, wake_id)
            if found is None:
                return None
            agent_id = found.agent_id
        if not await _settle_row(conn, wake_id, agent_id, None, status, note=note, error=error, thinking=thinking):
            return None
        return await link(conn, agent_id, wake_id)


# -- the content store -------------------------------------------------------------------------


async def store_contents(conn: asyncpg.Connection, contents: Mapping[str, tuple[str, str]]) -> None:
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


def chain_of(previous: str, root: str | None, transcript: str | None = None) -> str:
    """One link: sha256(previous link || manifest root || transcript root), as hex text; a row
    without a manifest or without a transcript contributes the empty string for it."""
    return hashlib.sha256((previous + (root or "") + (transcript or "")).encode("ascii")).hexdigest()


async def link(conn: asyncpg.Connection, agent_id: str, wake_id: uuid.UUID) -> str | None:
    """Link a settled row into the agent's chain, inside the caller's transaction (the settle's,
    under its fence). The head row's lock makes links of one agent one at a time. None if the row
    is open or already linked."""
    if not conn.is_in_transaction():
        raise RuntimeError("introspection.link must run inside the settle's transaction")
    head = await conn.fetchrow(_sql("chain_head_lock"), agent_id, GENESIS, wake_id)
    if head is None or not head["linkable"]:
        return None
    seq, value = int(head["seq"]) + 1, chain_of(head["chain"], head["manifest_root"], head["transcript_root"])
    if await conn.fetchval(_sql("chain_link"), wake_id, seq, value, agent_id) is None:
        return None
    return value


async def chain_head(conn: asyncpg.Connection, agent_id: str) -> tuple[int, str] | None:
    row = await conn.fetchrow(_sql("chain_head"), agent_id)
    return None if row is None else (int(row["seq"]), row["chain"])


@dataclass(frozen=True, kw_only=True)
class ChainRow:
    """A linked row as `wake verify --chain` walks it."""

    wake_id: uuid.UUID
    chain_seq: int
    chain: str
    manifest_root: str | None
    status: Status
    started_at: dt.datetime
    transcript_root: str | None = None  # a row with a transcript links it too (docs/ledger.md)

    @classmethod
    def from_row(cls, r: asyncpg.Record) -> Self:
        return cls(wake_id=r["wake_id"], chain_seq=r["chain_seq"], chain=r["chain"], manifest_root=r["manifest_root"],
                   status=Status(r["status"]), started_at=r["started_at"], transcript_root=r["transcript_root"])


async def chain_rows(conn: asyncpg.Connection, agent_id: str) -> list[ChainRow]:
    return [ChainRow.from_row(r) for r in await conn.fetch(_sql("chain_rows"), agent_id)]


async def chain_agents(conn: asyncpg.Connection) -> list[str]:
    return [r["agent_id"] for r in await conn.fetch(_sql("chain_agents"))]


@dataclass(frozen=True, kw_only=True)
class ChainCheck:
    """`wake verify --chain` for one agent: rows walked, and the first break (None: intact)."""

    agent_id: str
    rows: int
    head: tuple[int, str] | None
    broken: ChainRow | None = None
    why: str | None = None


def walk(agent_id: str, rows: Sequence[ChainRow], head: tuple[int, str] | None) -> ChainCheck:
    """Recompute every link from the first; name the first row whose link, number or place breaks."""
    previous, seq = GENESIS, 0
    for row in rows:
        if row.chain_seq != seq + 1:
            return ChainCheck(agent_id=agent_id, rows=len(rows), head=head, broken=row,
                              why=f"link {seq + 1} is missing: the row before this one was removed or renumbered")
        expected = chain_of(previous, row.manifest_root, row.transcript_root)
        if row.chain != expected:
            return ChainCheck(agent_id=agent_id, rows=len(rows), head=head, broken=row,
                              why=f"its link is {row.chain}, its root and the link before it give {expected}")
        previous, seq = row.chain, row.chain_seq
    if head is not None and head != (seq, previous):
        return ChainCheck(agent_id=agent_id, rows=len(rows), head=head, broken=None,
                          why=f"the chain head is link {head[0]} {head[1]}, the rows end at link {seq} {previous}")
    return ChainCheck(agent_id=agent_id, rows=len(rows), head=head)


@dataclass(frozen=True, kw_only=True)
class Thinking:
    """Steps 7 and 9 as the row stores them."""

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


def _json(value: object) -> Any:
    return json.loads(value) if isinstance(value, str) else value


@dataclass(frozen=True, kw_only=True)
class WakeRecord:
    """One row of `wake_introspection_ledger` as read (`get`): every column."""

    wake_id: uuid.UUID
    agent_id: str
    tier: Tier
    trigger: Trigger
    scheduled_for: dt.datetime | None
    status: Status
    started_at: dt.datetime
    finished_at: dt.datetime | None
    manifest_root: str | None
    blocks: BlockStates
    active_tools_count: int
    active_tool_names: list[str]
    tool_hashes: Mapping[str, str]
    registry_tool_count: int
    fence: int | None
    host: str
    pid: int
    version: str
    config_hash: str
    diff: WakeDiff | None
    note: str | None
    error: str | None
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: Decimal
    turns: int
    tool_calls: int
    refusals: int
    stop_reason: str | None
    final_text: str | None
    escalation_cause: str | None
    unchecked_absence_claims: int
    chain_seq: int | None
    chain: str | None
    arrival_order: list[str]
    peak_pressure: float | None
    transcript_root: str | None  # the root over the wake's recorded conversation (ledgers.transcripts), linked into the chain
    trace_id: str | None = None  # the OpenTelemetry trace its spans were exported under (docs/traces.md)

    @classmethod
    def from_row(cls, r: asyncpg.Record | Mapping[str, Any]) -> Self:
        return cls(
            wake_id=r["wake_id"], agent_id=r["agent_id"], tier=Tier(r["tier"]), trigger=Trigger(r["trigger"]), scheduled_for=r["scheduled_for"],
            status=Status(r["status"]), started_at=r["started_at"], finished_at=r["finished_at"], manifest_root=r["manifest_root"],
            blocks=_json(r["blocks"]) or {}, active_tools_count=r["active_tools_count"], active_tool_names=list(r["active_tool_names"]),
            tool_hashes=_json(r["tool_hashes"]) or {}, registry_tool_count=r["registry_tool_count"], fence=r["fence"], host=r["host"],
            pid=r["pid"], version=r["version"], config_hash=r["config_hash"], diff=WakeDiff.from_json(_json(r["diff"])), note=r["note"],
            error=r["error"], model=r["model"], prompt_tokens=r["prompt_tokens"], completion_tokens=r["completion_tokens"],
            cached_tokens=r["cached_tokens"], cost_usd=r["cost_usd"], turns=r["turns"], tool_calls=r["tool_calls"], refusals=r["refusals"],
            stop_reason=r["stop_reason"], final_text=r["final_text"], escalation_cause=r["escalation_cause"],
            unchecked_absence_claims=r["unchecked_absence_claims"], chain_seq=r["chain_seq"], chain=r["chain"],
            arrival_order=list(r["arrival_order"]), peak_pressure=r["peak_pressure"], transcript_root=r["transcript_root"],
            trace_id=r.get("trace_id"),
        )

    def columns(self) -> dict[str, Any]:
        """The row as `wake show` prints it (text or JSON): every column in table order, the diff
        as stored; a dict because the printer walks the columns by name."""
        cols = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        cols["diff"] = self.diff.as_json() if self.diff is not None else None
        return cols


def _record(record: asyncpg.Record | None) -> WakeRecord | None:
    return None if record is None else WakeRecord.from_row(record)


async def get(conn: asyncpg.Connection, wake_id: uuid.UUID) -> WakeRecord | None:
    return _record(await conn.fetchrow(_sql("get"), wake_id))


async def resolve_id(conn: asyncpg.Connection, text: str, agent_id: str | None = None) -> uuid.UUID | None:
    """A full wake id, or the one wake a prefix names (with `agent_id`, among that agent's wakes
    only); None when no wake has the id or the prefix. Raises `ids.BadPrefix` for a prefix too
    short or not hex, `ids.AmbiguousPrefix` when several match."""
    try:
        full = uuid.UUID(text)
    except ValueError:
        low, high = ids.prefix_range(text)
    else:  # a full id names a wake only when one has it
        low = high = full
    rows = await conn.fetch(_sql("find_by_prefix"), low, high, ids.LISTED_MATCHES, agent_id)
    return ids.unique(rows, what="wake", prefix=text, column="wake_id")


@dataclass(frozen=True, kw_only=True)
class Compared:
    """An earlier settled wake as a new one compares with it (its diff, the whisper gate, the
    approvals' window): the columns those read, not the whole row. A whisper reads two of these
    every wake, so it does not read what no comparison uses (the final text, the stored diff)."""

    wake_id: uuid.UUID
    tier: Tier
    status: Status
    started_at: dt.datetime
    manifest_root: str | None
    blocks: BlockStates
    tool_hashes: Mapping[str, str]

    @classmethod
    def from_row(cls, r: asyncpg.Record | Mapping[str, Any]) -> Self:
        return cls(wake_id=r["wake_id"], tier=Tier(r["tier"]), status=Status(r["status"]), started_at=r["started_at"],
                   manifest_root=r["manifest_root"], blocks=_json(r["blocks"]) or {}, tool_hashes=_json(r["tool_hashes"]) or {})


@dataclass(frozen=True, kw_only=True)
class RecentLine:
    """A wake as the recent-wakes block lists it: when, which tier and trigger, how it ended and
    why, with how many tools. Read with the previous wakes on every whisper, so only these columns
    (not the final text a full wake wrote, which the block does not show)."""

    wake_id: uuid.UUID
    tier: Tier
    trigger: Trigger
    status: Status
    started_at: dt.datetime
    active_tools_count: int
    stop_reason: str | None
    note: str | None
    error: str | None

    @classmethod
    def from_row(cls, r: asyncpg.Record | Mapping[str, Any]) -> Self:
        return cls(wake_id=r["wake_id"], tier=Tier(r["tier"]), trigger=Trigger(r["trigger"]), status=Status(r["status"]),
                   started_at=r["started_at"], active_tools_count=r["active_tools_count"], stop_reason=r["stop_reason"], note=r["note"],
                   error=r["error"])


@dataclass(frozen=True, kw_only=True)
class Previous:
    """The wakes a new one is compared with: the agent's newest settled one, and its tier's."""

    agent: Compared | None = None
    tier: Compared | None = None
    recent: tuple[RecentLine, ...] | None = None  # the agent's newest wakes, newest first, when read with them


def previous_part(agent_id: str, tier: str, before: dt.datetime, *, recent: int | None = None) -> queries.Part[Previous]:
    """`previous_both`'s read, to run alone or beside other ledgers' (`queries.together`)."""
    return queries.Part(_sql("previous_settled_both"), (agent_id, tier, before, recent or 0), _previous if recent is not None else _previous_only)


async def previous_both(
    conn: asyncpg.Connection, agent_id: str, tier: str, before: dt.datetime, *, recent: int | None = None,
) -> Previous:
    """The agent's newest settled wake with a manifest started before `before`, and its tier's, in one round trip; with `recent`, also that
    many of the agent's newest wakes (`recent(agent_id=...)`) in the same round trip. Each row carries the columns its use reads
    (`Compared`, `RecentLine`), no more."""
    return await queries.one(conn, previous_part(agent_id, tier, before, recent=recent))


_COMPARED = tuple(f.name for f in dataclasses.fields(Compared))
_RECENT_LINE = tuple(f.name for f in dataclasses.fields(RecentLine))


def _compared_both(row: asyncpg.Record) -> tuple[Compared | None, Compared | None]:
    """The agent's previous wake and its tier's; an agent with one tier (or whose newest wake is this tier's): one wake, read once."""
    of_agent, of_tier = row["previous_of_agent"], row["previous_of_tier"]
    agent = None if of_agent is None else Compared.from_row(dict(zip(_COMPARED, of_agent, strict=True)))
    if of_tier is None or (agent is not None and agent.wake_id == of_tier[0]):
        return agent, agent if of_tier is not None else None
    return agent, Compared.from_row(dict(zip(_COMPARED, of_tier, strict=True)))


def _previous_only(row: asyncpg.Record) -> Previous:
    agent, tier = _compared_both(row)
    return Previous(agent=agent, tier=tier)


def _previous(row: asyncpg.Record) -> Previous:
    agent, tier = _compared_both(row)
    lines = (RecentLine.from_row(dict(zip(_RECENT_LINE, r, strict=True))) for r in row["recent_wakes"])
    return Previous(agent=agent, tier=tier, recent=tuple(sorted(lines, key=lambda w: w.started_at, reverse=True)))


def _insert_args(row: WakeRow, status: str) -> tuple[object, ...]:
    return (
        row.wake_id, row.agent_id, row.tier, row.trigger, row.scheduled_for, status, row.started_at,
        row.manifest_root, json.dumps(dict(row.blocks)), len(row.tool_hashes), row.active_tool_names,
        json.dumps(dict(row.tool_hashes)), row.registry_tool_count, row.fence, row.host, row.pid,
        row.version, row.config_hash, json.dumps(row.diff.as_json()) if row.diff is not None else None,
        row.note, row.error, row.escalation_cause, list(row.arrival_order), row.trace_id,
    )


def _transaction(conn: asyncpg.Connection) -> contextlib.AbstractAsyncContextManager[object]:
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


async def _insert_settled_linked(conn: asyncpg.Connection, row: WakeRow, status: str, thinking: Thinking) -> Settled | None:
    """`insert_settled_linked`: the settled row, its contents and its link in one statement.
    Returns the link and whether the tier had an open incident; None when the agent has no chain head yet (nothing was written: link it the
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
    return Settled(chain=str(got["chain"]), incidents_open=bool(got["incidents_open"]))


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


@dataclass(frozen=True, kw_only=True)
class WakeSummary:
    """A row as the lists read it (`recent`: `wake ledger`, the recent-wakes block, `wake_history`)."""

    wake_id: uuid.UUID
    agent_id: str
    tier: Tier
    trigger: Trigger
    scheduled_for: dt.datetime | None
    status: Status
    started_at: dt.datetime
    finished_at: dt.datetime | None
    manifest_root: str | None
    active_tools_count: int
    registry_tool_count: int
    note: str | None
    error: str | None
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: Decimal
    turns: int
    tool_calls: int
    refusals: int
    stop_reason: str | None
    final_text: str | None
    escalation_cause: str | None

    @classmethod
    def from_row(cls, r: asyncpg.Record) -> Self:
        values = {name: r[name] for name in _summary_columns()}
        values["tier"], values["trigger"], values["status"] = Tier(r["tier"]), Trigger(r["trigger"]), Status(r["status"])
        return cls(**values)

    def columns(self) -> dict[str, object]:
        """The columns as `wake ledger --json` and `wake status` print them: JSON, so a dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@functools.cache
def _summary_columns() -> tuple[str, ...]:
    """`WakeSummary`'s columns, read once (every whisper decodes its recent wakes with them)."""
    return tuple(f.name for f in dataclasses.fields(WakeSummary))


async def recent(
    conn: asyncpg.Connection, *, agent_id: str | None = None, tier: str | None = None, status: str | None = None,
    trigger: str | None = None, limit: int = 20,
) -> list[WakeSummary]:
    """The newest wakes, newest first, of the agent, tier, status and trigger given (None: any).
    Only the filters given reach the query (`queries.filtered`): each combination uses its index."""
    given = {c: v for c, v in (("agent_id", agent_id), ("tier", tier), ("status", status), ("trigger", trigger)) if v is not None}
    sql = queries.filtered(_sql("recent"), tuple(given), 2)
    return [WakeSummary.from_row(r) for r in await conn.fetch(sql, limit, *given.values())]


async def last_two(conn: asyncpg.Connection, agent_id: str, tier: str | None = None, *, across_tiers: bool = False) -> list[uuid.UUID]:
    """The agent's last two settled wakes, newest first: of `tier` (None: the tier of its newest
    wake), or of any tier with `across_tiers`."""
    return [r["wake_id"] for r in await conn.fetch(_sql("last_two"), agent_id, tier, across_tiers)]


@dataclass(frozen=True, kw_only=True)
class Running:
    """The agent's wake in progress, as a busy slot names it (`running`)."""

    wake_id: uuid.UUID
    tier: Tier
    trigger: Trigger
    started_at: dt.datetime
    host: str
    pid: int


async def running(conn: asyncpg.Connection, agent_id: str) -> Running | None:
    """The agent's wake in progress (its newest row still `started`), or None."""
    r = await conn.fetchrow(_sql("running"), agent_id)
    if r is None:
        return None
    return Running(
        wake_id=r["wake_id"], tier=Tier(r["tier"]), trigger=Trigger(r["trigger"]), started_at=r["started_at"], host=r["host"], pid=r["pid"],
    )


@dataclass(frozen=True, kw_only=True)
class AbandonedRow:
    """A row left `started` that a new lease holder closed `abandoned`, and its chain link."""

    wake_id: uuid.UUID
    tier: Tier
    host: str
    pid: int
    fence: int | None
    chain: str | None


async def abandon_started(conn: asyncpg.Connection, agent_id: str, reason: str) -> list[AbandonedRow]:
    """Close every row of the agent still `started` as `abandoned`, each linked into the chain;
    call only under the agent's lease (its previous holder is gone). Returns the rows closed."""
    async with _transaction(conn):
        closed = list(await conn.fetch(_sql("abandon_started"), agent_id, reason))
        return [
            AbandonedRow(wake_id=r["wake_id"], tier=Tier(r["tier"]), host=r["host"], pid=r["pid"], fence=r["fence"],
                         chain=await link(conn, agent_id, r["wake_id"]))
            for r in closed
        ]


async def agents_with_started(conn: asyncpg.Connection) -> list[str]:
    return [r["agent_id"] for r in await conn.fetch(_sql("agents_with_started"))]


@dataclass(frozen=True, kw_only=True)
class LastSettled:
    """A tier's signs of life for the dead-man check: its newest row of a wake that ran
    (`ledgers.vocab.RAN`; None: none ever), and the newest slot a pause held back since (None: none)."""

    agent_id: str
    tier: str
    wake_id: uuid.UUID | None
    status: Status | None
    finished_at: dt.datetime | None
    paused_at: dt.datetime | None


async def last_settled(conn: asyncpg.Connection, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LastSettled]:
    """Each (agent, tier) of `pairs`, its signs of life (one statement)."""
    if not pairs:
        return {}
    rows = await conn.fetch(_sql("last_settled"), [a for a, _ in pairs], [t for _, t in pairs], list(RAN))
    return {
        (r["agent_id"], r["tier"]): LastSettled(
            agent_id=r["agent_id"], tier=r["tier"], wake_id=r["wake_id"], status=Status(r["status"]) if r["status"] else None,
            finished_at=r["finished_at"], paused_at=r["paused_at"],
        )
        for r in rows
    }
