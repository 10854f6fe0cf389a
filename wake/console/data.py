"""Everything the console shows, read through the ledger functions the CLI calls (`wake ledger`,
`wake show`, `wake verify`, `wake memory findings`, `wake facts`, `wake status`...): no query of
its own beyond `ledgers.console_reads`. The pages take what these functions return; a template
reads `row.status` whether a row is a dict or a record."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import asyncpg

from ledgers import commitments, console_reads, context_events, controls, fact_checks, facts, ids, introspection, outbox, tool_pins, transcripts
from ledgers import memory_ledger as memory_ledger
from ledgers.vocab import Status, Tier, Trigger
from wake.config import Config
from wake.daemon import remote, schedule
from wake.errors import InvalidInput, NotFound, WakeError
from wake.witness import manifest

TIMELINE_LIMIT = 200  # wakes on the timeline unless ?limit= says otherwise
TIMELINE_MAX = 2000
COST_DAYS = 7  # the days of cost per agent the timeline shows
AGENT_LISTED = 50  # findings, facts, commitments, memory writes and wakes on an agent's page


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else f"{text[:n]}… ({len(text)} chars)"


# -- the timeline -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Filters:
    """The timeline's filters, from its query string; every value is one the ledger can hold."""

    agent: str | None = None
    tier: str | None = None
    status: str | None = None
    trigger: str | None = None
    limit: int = TIMELINE_LIMIT

    @classmethod
    def parse(cls, params: Mapping[str, str], config: Config) -> Filters:
        """Raises InvalidInput (one line, the value clipped) for a value no wake can have."""
        got = {k: (params.get(k) or "").strip() or None for k in ("agent", "tier", "status", "trigger")}
        closed = {"tier": Tier, "status": Status, "trigger": Trigger}
        for key, vocab in closed.items():
            value = got[key]
            if value is not None and value not in set(vocab):
                raise InvalidInput(f"no {key} {_clip(value)!r}; expected one of {', '.join(vocab)}")
        if got["agent"] is not None and got["agent"] not in config.agents:
            raise InvalidInput(f"no agent {_clip(got['agent'])!r}; configured: {', '.join(config.agents)}")
        text = params.get("limit") or str(TIMELINE_LIMIT)
        if not text.isdigit() or not 1 <= int(text) <= TIMELINE_MAX:
            raise InvalidInput(f"limit must be a number from 1 to {TIMELINE_MAX}, got {_clip(text)!r}")
        return cls(agent=got["agent"], tier=got["tier"], status=got["status"], trigger=got["trigger"], limit=int(text))

    def query(self) -> str:
        """The query string that gives these filters back (empty for none)."""
        pairs = {k: v for k, v in (("agent", self.agent), ("tier", self.tier), ("status", self.status), ("trigger", self.trigger)) if v}
        if self.limit != TIMELINE_LIMIT:
            pairs["limit"] = str(self.limit)
        return urlencode(pairs)


@dataclass(frozen=True)
class Lane:
    """One agent's tier on the timeline: its wakes, oldest first."""

    agent_id: str
    tier: str
    wakes: Sequence[Any]


@dataclass(frozen=True, kw_only=True)
class Timeline:
    filters: Filters
    rows: Sequence[Any]  # newest first, as `wake ledger` lists them
    lanes: list[Lane]
    costs: dict[str, list[console_reads.DayCost]]
    agents: list[str]
    vocab: dict[str, list[str]]
    now: dt.datetime


async def recent(conn: asyncpg.Connection, filters: Filters) -> Sequence[Any]:
    """The wakes the filters select, newest first: `wake ledger`'s query."""
    return [r.columns() for r in await introspection.recent(
        conn, agent_id=filters.agent, tier=filters.tier, status=filters.status, trigger=filters.trigger, limit=filters.limit,
    )]


def lanes(rows: Sequence[Any]) -> list[Lane]:
    by: dict[tuple[str, str], list[Any]] = {}
    for r in reversed(rows):
        by.setdefault((r["agent_id"], r["tier"]), []).append(r)
    order = {t.value: i for i, t in enumerate(Tier)}
    return [Lane(a, t, w) for (a, t), w in sorted(by.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9)))]


async def timeline(conn: asyncpg.Connection, config: Config, filters: Filters, now: dt.datetime) -> Timeline:
    rows = await recent(conn, filters)
    agents = [filters.agent] if filters.agent else list(config.agents)
    since = now - dt.timedelta(days=COST_DAYS)
    costs = {a: await console_reads.daily_costs(conn, a, config.agents[a].timezone, since) for a in agents}
    vocab = {"tier": [t.value for t in Tier], "status": [s.value for s in Status], "trigger": [t.value for t in Trigger]}
    return Timeline(filters=filters, rows=rows, lanes=lanes(rows), costs=costs, agents=list(config.agents), vocab=vocab, now=now)


def fingerprint(rows: Sequence[Any]) -> tuple[tuple[str, str], ...]:
    """What the live timeline compares between polls: each wake and its status."""
    return tuple((str(r["wake_id"]), str(r["status"])) for r in rows)


# -- a wake -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockView:
    """One arrival block: what the row recorded of it, its stored text, and its verification."""

    name: str
    meta: Mapping[str, Any]
    text: str | None
    problem: str | None


@dataclass(frozen=True)
class ToolView:
    name: str
    hash: str
    problem: str | None


@dataclass(frozen=True, kw_only=True)
class WakePage:
    row: Mapping[str, Any]
    blocks: list[BlockView]
    tools: list[ToolView]
    verification: manifest.Verification | None
    other_problems: list[manifest.Difference]  # differences that name no one block or tool
    deliveries: Sequence[Any]
    pressure: Sequence[Any]  # the prompt's size before each model call (`wake_turns`)
    actions: list[console_reads.Action]
    transcript: list[Any] = field(default_factory=list)


async def transcript(conn: asyncpg.Connection, wake_id: uuid.UUID, row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The wake's conversation as the model saw it (`wake show --transcript`'s reader): each
    message, an assistant turn with the tool calls it made and each call's answer; empty for a
    wake that sent nothing to a model."""
    said = transcripts.as_dict(await transcripts.read(conn, wake_id), row)
    turns: list[dict[str, Any]] = [{"role": m["role"], "text": m["content"] or "", "calls": []} for m in said["messages"]]
    assistants = [(i, m["turn"]) for i, m in enumerate(said["messages"]) if m["role"] == "assistant"]
    for c in said["calls"]:
        at = [i for i, turn in assistants if turn <= c["turn"]]
        if not at:
            continue
        try:
            arguments = json.loads(c["arguments"]) if isinstance(c["arguments"], str) else c["arguments"]
        except ValueError:
            arguments = c["arguments"]
        turns[at[-1]]["calls"].append(
            {"name": c["tool"], "arguments": arguments, "answer": c["answer"], "refused": c["outcome"] == "refused", "outcome": c["outcome"]}
        )
    return turns


async def resolve(conn: asyncpg.Connection, text: str) -> uuid.UUID:
    """A wake id from a full id or a unique prefix, as `wake show` takes it."""
    try:
        wake_id = await introspection.resolve_id(conn, text)
    except ids.IdLookupError as exc:
        raise NotFound(str(exc)) from exc
    if wake_id is None:
        raise NotFound(f"no wake matches {_clip(text)!r} (give a full id or a unique prefix)")
    return wake_id


async def wake_page(conn: asyncpg.Connection, wake_id: uuid.UUID, now: dt.datetime) -> WakePage:
    record = await introspection.get(conn, wake_id)
    if record is None:
        raise NotFound(f"no wake {wake_id}")
    row = record.columns()  # the page shows the row's columns, as `wake show` does
    arrival = await introspection.arrival(conn, wake_id)
    verification = None
    if row["manifest_root"] is not None:
        verification = manifest.verify_row(row, await introspection.contents(conn, manifest.stored_hashes(row)))
    problems = {d.part: d.detail for d in verification.differences} if verification else {}
    shown = [n for n, _ in arrival]
    blocks = [BlockView(n, row["blocks"].get(n, {}), t, problems.get(f"block {n}")) for n, t in arrival]
    blocks += [BlockView(n, b, None, problems.get(f"block {n}")) for n, b in row["blocks"].items() if n not in shown]
    tools = [ToolView(n, h, problems.get(f"tool {n}")) for n, h in sorted(row["tool_hashes"].items())]
    named = {f"block {b.name}" for b in blocks} | {f"tool {t.name}" for t in tools}
    return WakePage(
        row=row, blocks=blocks, tools=tools, verification=verification,
        other_problems=[d for d in (verification.differences if verification else []) if d.part not in named],
        deliveries=await outbox.of_wake(conn, wake_id), pressure=await context_events.turns(conn, wake_id),
        actions=await console_reads.wake_actions(conn, row["agent_id"], wake_id, row["started_at"], row["finished_at"] or now),
        transcript=await transcript(conn, wake_id, row),
    )


# -- an agent ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TierView:
    tier: str
    schedule: str
    next_fire: dt.datetime | None
    binds: list[str]
    model: str | None


@dataclass(frozen=True, kw_only=True)
class Live:
    """What Redis says of the agent now (`wake status`), or why it could not say."""

    error: str | None = None
    daemon_alive: bool = False
    lease: Mapping[str, Any] | None = None
    running: Sequence[Any] = field(default_factory=list)
    next_fires: Sequence[Any] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class AgentPage:
    agent_id: str
    timezone: str
    tiers: list[TierView]
    pauses: Sequence[Any]
    oneshots: Sequence[Any]
    live: Live
    halted: bool
    findings: Sequence[Any]
    findings_total: int
    pins: list[Any]
    facts: Sequence[Any]
    facts_total: int
    checks: dict[uuid.UUID, fact_checks.Check]
    commitments: Sequence[Any]
    commitments_total: int
    writes: Sequence[Any]
    writes_total: int
    wakes: Sequence[Any]


async def live(config: Config, agent_id: str, now: dt.datetime) -> Live:
    try:
        s = await remote.status(config, now)
    except (WakeError, OSError) as exc:
        return Live(error=_clip(str(exc), 200))
    return Live(
        daemon_alive=s["daemon_alive"], lease=next((x for x in s["leases"] if x["agent"] == agent_id), None),
        running=[w for w in s["running"] if w.get("agent") == agent_id], next_fires=[f for f in s["next_fires"] if f["agent"] == agent_id],
    )


async def pins(conn: asyncpg.Connection, agent_id: str) -> list[dict[str, Any]]:
    """The open tool-pin findings (an MCP tool whose declaration changed from its pin: not bound
    under `strict` until accepted), as `wake tools findings` reads them; pins are the process's,
    not one agent's, so every agent's page shows them. Each is accepted on the page through
    `actions.accept` (kind `tool_pin`), as `wake tools accept` does."""
    return [
        {"id": f"{f.server}/{f.tool}", "tool": f.name,
         "why": f"declaration changed ({f.policy}): pinned {f.pinned_hash[:12]}, seen {f.seen_hash[:12]}"}
        for f in await tool_pins.open_findings(conn)
    ]


async def agent_page(conn: asyncpg.Connection, config: Config, agent_id: str, now: dt.datetime) -> AgentPage:
    if agent_id not in config.agents:
        raise NotFound(f"no agent {_clip(agent_id)!r}; configured: {', '.join(config.agents)}")
    agent = config.agents[agent_id]
    tiers = []
    for tier, conf in agent.tiers.items():
        s = schedule.from_config(config, agent_id, tier)
        tiers.append(TierView(tier, s.describe(), schedule.next_fire(s, now), list(conf.binds), conf.model))
    found, found_total = await memory_ledger.findings(conn, agent_id, state="open", limit=AGENT_LISTED)
    fact_rows, fact_total = await facts.listing(conn, agent_id, include_all=False, limit=AGENT_LISTED)
    checked, _ = await fact_checks.latest(conn, agent_id, AGENT_LISTED * 4)
    open_commitments, commitments_total = await commitments.open_newest(conn, agent_id, limit=AGENT_LISTED)
    writes, writes_total = await memory_ledger.recent_writes(conn, agent_id, limit=AGENT_LISTED)
    return AgentPage(
        agent_id=agent_id, timezone=agent.timezone, tiers=tiers,
        pauses=[p for p in await controls.active_pauses(conn, now) if p.agent_id == agent_id],
        oneshots=[o for o in await controls.oneshots(conn) if o.agent_id == agent_id],
        live=await live(config, agent_id, now), halted=await memory_ledger.has_open_halt(conn, agent_id),
        findings=found, findings_total=found_total, pins=await pins(conn, agent_id),
        facts=fact_rows, facts_total=fact_total, checks={c.fact_id: c for c in checked},
        commitments=open_commitments, commitments_total=commitments_total, writes=writes, writes_total=writes_total,
        wakes=[r.columns() for r in await introspection.recent(conn, agent_id=agent_id, limit=AGENT_LISTED)],
    )
