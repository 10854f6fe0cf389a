"""Everything the console shows, read through the ledger functions the CLI calls (`wake ledger`,
`wake show`, `wake verify`, `wake memory findings`, `wake facts`, `wake status`...): no query of
its own beyond `ledgers.console_reads`. The pages take what these functions return; a template
reads `row.status` whether a row is a dict or a record."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict
from urllib.parse import urlencode

import asyncpg

from ledgers import (
    approvals,
    commitments,
    console_reads,
    context_events,
    controls,
    fact_checks,
    facts,
    ids,
    introspection,
    outbox,
    replays,
    tool_flows,
    tool_pins,
    transcripts,
)
from ledgers import incidents as incidents
from ledgers import memory_ledger as memory_ledger
from ledgers.replays import EvalRecord, ReplayRecord
from ledgers.vocab import Status, Tier, Trigger
from wake.config import Config
from wake.daemon import commands, remote, schedule
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
        if not (text.isascii() and text.isdigit()) or len(text) > 6 or not 1 <= int(text) <= TIMELINE_MAX:
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
    wakes: Sequence[introspection.WakeSummary]


FAILING = frozenset({Status.failed.value, Status.aborted.value, Status.abandoned.value, Status.missed.value})  # `wake.run.incident_policy.FAILING`


@dataclass(frozen=True)
class Mark:
    """A wake row's part in an incident (docs/incidents.md): the row that opened it, or a later one
    that counted on it (its agent, tier and error signature, between the incident's first and last row)."""

    incident_id: int
    opened: bool

    @property
    def label(self) -> str:
        return f"opened incident {self.incident_id}" if self.opened else f"incident {self.incident_id}"


async def incident_marks(conn: asyncpg.Connection, rows: Sequence[introspection.WakeSummary]) -> dict[str, Mark]:
    """Each shown row's incident, by wake id: what the timeline marks. A failing row belongs to the
    incident of its agent, tier and signature whose rows span its start (`wake.run.incident_policy` keys
    an incident's rows by their start), the incident's first and last rows by their ids."""
    if not rows:
        return {}
    starts = [r.started_at for r in rows]
    found = await incidents.overlapping(conn, sorted({r.agent_id for r in rows}), min(starts), max(starts))
    by_id = {i.first_wake_id: i for i in found} | {i.last_wake_id: i for i in found}
    by_key: dict[tuple[str, str, str], list[incidents.Incident]] = {}
    for i in found:
        by_key.setdefault((i.agent_id, i.tier, i.signature), []).append(i)
    marks: dict[str, Mark] = {}
    for r in rows:
        inc = by_id.get(r.wake_id)
        if inc is None and r.status in FAILING:
            sig = f"{r.status}: {incidents.signature(r.error or r.note or r.status)}"
            inc = next((i for i in by_key.get((r.agent_id, r.tier, sig), []) if i.opened_at <= r.started_at <= i.last_seen_at), None)
        if inc is not None:
            marks[str(r.wake_id)] = Mark(inc.id, inc.first_wake_id == r.wake_id)
    return marks


@dataclass(frozen=True, kw_only=True)
class Timeline:
    filters: Filters
    rows: Sequence[introspection.WakeSummary]  # newest first, as `wake ledger` lists them
    marks: dict[str, Mark]  # wake id: its incident
    lanes: list[Lane]
    costs: dict[str, list[console_reads.DayCost]]
    agents: list[str]
    vocab: dict[str, list[str]]
    now: dt.datetime


async def recent(conn: asyncpg.Connection, filters: Filters) -> list[introspection.WakeSummary]:
    """The wakes the filters select, newest first: `wake ledger`'s query."""
    return await introspection.recent(
        conn, agent_id=filters.agent, tier=filters.tier, status=filters.status, trigger=filters.trigger, limit=filters.limit,
    )


def lanes(rows: Sequence[introspection.WakeSummary]) -> list[Lane]:
    by: dict[tuple[str, str], list[introspection.WakeSummary]] = {}
    for r in reversed(rows):
        by.setdefault((r.agent_id, r.tier), []).append(r)
    order = {t.value: i for i, t in enumerate(Tier)}
    return [Lane(a, t, w) for (a, t), w in sorted(by.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9)))]


async def timeline(conn: asyncpg.Connection, config: Config, filters: Filters, now: dt.datetime) -> Timeline:
    rows = await recent(conn, filters)
    agents = [filters.agent] if filters.agent else list(config.agents)
    since = now - dt.timedelta(days=COST_DAYS)
    costs = {a: await console_reads.daily_costs(conn, a, config.agents[a].timezone, since) for a in agents}
    vocab = {"tier": [t.value for t in Tier], "status": [s.value for s in Status], "trigger": [t.value for t in Trigger]}
    return Timeline(filters=filters, rows=rows, marks=await incident_marks(conn, rows), lanes=lanes(rows), costs=costs,
                    agents=list(config.agents), vocab=vocab, now=now)


def fingerprint(rows: Sequence[introspection.WakeSummary], marks: Mapping[str, Mark] | None = None) -> tuple[tuple[str, str, str], ...]:
    """What the live timeline compares between polls: each wake, its status and its incident."""
    shown = marks or {}
    return tuple((str(r.wake_id), str(r.status), m.label if (m := shown.get(str(r.wake_id))) else "") for r in rows)


# -- a wake -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockView:
    """One arrival block: what the row recorded of it, its stored text, and its verification."""

    name: str
    meta: Mapping[str, object]
    text: str | None
    problem: str | None


@dataclass(frozen=True)
class ToolView:
    name: str
    hash: str
    problem: str | None


@dataclass(frozen=True, kw_only=True)
class WakePage:
    row: Mapping[str, object]
    blocks: list[BlockView]
    tools: list[ToolView]
    verification: manifest.Verification | None
    other_problems: list[manifest.Difference]  # differences that name no one block or tool
    deliveries: Sequence[outbox.DeliveryState]
    pressure: Sequence[context_events.Turn]  # the prompt's size before each model call (`wake_turns`)
    actions: list[console_reads.Action]
    transcript: list[ShownTurn] = field(default_factory=list)


class ShownCall(TypedDict):
    """A tool call under the turn that made it, with its answer."""

    name: str
    arguments: object  # the model's arguments, decoded when they are JSON
    answer: str | None
    refused: bool
    outcome: str
    answered_from: str | None
    mutates: bool | None


class ShownTurn(TypedDict):
    """A message of a transcript as the page shows it, with the calls an assistant turn made."""

    role: str
    label: str
    text: str
    calls: list[ShownCall]


async def transcript(conn: asyncpg.Connection, wake_id: uuid.UUID, row: Mapping[str, object]) -> list[ShownTurn]:
    """The wake's conversation as the model saw it (`wake show --transcript`'s reader): each
    message, an assistant turn with the tool calls it made and each call's answer; empty for a
    wake that sent nothing to a model."""
    return turns(transcripts.as_dict(await transcripts.read(conn, wake_id), row))


def turns(said: Mapping[str, Any]) -> list[ShownTurn]:
    """A transcript as data (a wake's, `transcripts.as_dict`, or a replay's, `replays.as_dict`) as the page shows it."""
    # A tool's answer is shown once, under the call that asked for it: its `tool` message is not a
    # section of its own. An assistant message is labelled with its model turn (the ledger's
    # `turn`), the arrival's messages with their role alone, so a two-turn wake reads two turns.
    shown = [m for m in said["messages"] if m["role"] != "tool"]
    shaped: list[ShownTurn] = [
        {"role": m["role"], "label": f"turn {m['turn']} · assistant" if m["role"] == "assistant" else m["role"], "text": m["content"] or "",
         "calls": []}
        for m in shown
    ]
    assistants = [(i, m["turn"]) for i, m in enumerate(shown) if m["role"] == "assistant"]
    for c in said["calls"]:
        at = [i for i, turn in assistants if turn <= c["turn"]]
        if not at:
            continue
        try:
            arguments = json.loads(c["arguments"]) if isinstance(c["arguments"], str) else c["arguments"]
        except ValueError:
            arguments = c["arguments"]
        shaped[at[-1]]["calls"].append(
            {"name": c["tool"], "arguments": arguments, "answer": c["answer"], "refused": c["outcome"] == "refused", "outcome": c["outcome"],
             "answered_from": c.get("answered_from"), "mutates": c.get("mutates")}
        )
    return shaped


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
    lease: Mapping[str, object] | None = None
    running: Sequence[Mapping[str, object]] = field(default_factory=list)
    next_fires: Sequence[Mapping[str, object]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class AgentPage:
    agent_id: str
    timezone: str
    tiers: list[TierView]
    pauses: Sequence[controls.Pause]
    oneshots: Sequence[controls.OneShot]
    live: Live
    halted: bool
    findings: Sequence[memory_ledger.FindingRecord]
    findings_total: int
    pins: list[dict[str, str]]
    facts: Sequence[facts.Fact]
    facts_total: int
    checks: dict[uuid.UUID, fact_checks.Check]
    commitments: Sequence[commitments.Open]
    commitments_total: int
    writes: Sequence[memory_ledger.MemoryWrite]
    writes_total: int
    wakes: Sequence[introspection.WakeSummary]
    marks: dict[str, Mark]  # the wakes' incidents
    incidents: Sequence[incidents.Incident]  # open, the newest first
    memory: MemoryFiles
    approvals: list[PendingCall] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class MemoryFile:
    """A file of the agent's memory as its page lists it: a file with an open finding shows the
    finding (`quarantined`), not its description."""

    path: str
    description: str
    bytes: int
    quarantined: str | None


@dataclass(frozen=True, kw_only=True)
class MemoryFiles:
    files: list[MemoryFile]
    total: int
    note: str | None  # why there are none to list (memory off, no repository yet)


async def memory_files(conn: asyncpg.Connection, config: Config, agent_id: str, now: dt.datetime) -> MemoryFiles:
    """The agent's memory files at the tip (the first AGENT_LISTED), each with its description or its quarantine."""
    try:
        entries = await asyncio.to_thread(lambda: commands.open_repo(config, agent_id, now).ls())
    except WakeError as exc:
        return MemoryFiles(files=[], total=0, note=_clip(str(exc), 200))
    listed = entries[:AGENT_LISTED]
    held = await memory_ledger.open_by_path(conn, agent_id, [e.path for e in listed])
    return MemoryFiles(total=len(entries), note=None, files=[
        MemoryFile(path=e.path, description=e.description, bytes=e.bytes,
                   quarantined=f"open {held[e.path].severity} finding #{held[e.path].finding_id}" if e.path in held else None)
        for e in listed
    ])


async def live(config: Config, agent_id: str, now: dt.datetime) -> Live:
    try:
        s = await remote.status(config, now)
    except (WakeError, OSError) as exc:
        return Live(error=_clip(str(exc), 200))
    return Live(
        daemon_alive=s["daemon_alive"], lease=next((x for x in s["leases"] if x["agent"] == agent_id), None),
        running=[w for w in s["running"] if w.get("agent") == agent_id], next_fires=[f for f in s["next_fires"] if f["agent"] == agent_id],
    )


async def pins(conn: asyncpg.Connection, agent_id: str) -> list[dict[str, str]]:
    """The open tool-pin findings (an MCP tool whose declaration changed from its pin: not bound
    under `strict` until accepted), as `wake tools findings` reads them; pins are the process's,
    not one agent's, so every agent's page shows them, each with the declaration's diff before
    its button. Each is accepted on the page through
    `actions.accept` (kind `tool_pin`), as `wake tools accept` does."""
    listed = [
        {"id": f"{f.server}/{f.tool}", "tool": f.name, "kind": "tool_pin",
         "why": f"declaration changed ({f.policy}): pinned {f.pinned_hash[:12]}, seen {f.seen_hash[:12]}", "diff": f.diff}
        for f in await tool_pins.open_findings(conn)
    ]
    return listed + [  # and the agent's toxic flows (docs/tools.md), accepted per tier (kind `toxic_flow`, as `wake tools accept-flow`)
        {"id": f"{f.tier}/{f.flow_id}", "tool": f"toxic flow {f.flow_id} ({f.tier})", "kind": "toxic_flow",
         "why": f"{f.policy}: untrusted input {', '.join(f.untrusted)}; private data {', '.join(f.private)}; egress {', '.join(f.egress)}",
         "diff": ""}  # a flow has no declaration to diff (the page rendered none; a missing key was a 500)
        for f in await tool_flows.open_of_agent(conn, agent_id)
    ]


@dataclass(frozen=True, kw_only=True)
class PendingCall:
    """A call of the agent that waits for an operator's decision, as its page shows it: the tool,
    its arguments (the model's: shown as data, never as markup) and the reason; `expired` when it
    has waited `[tools] approval_ttl` (a decision on it is refused, and the next wake or `wake
    approvals` records it `expired`)."""

    id: int
    tool: str
    arguments: str
    reason: str
    reason_from: str
    requested_at: dt.datetime
    wake_id: uuid.UUID
    tier: str
    expired: bool


async def pending_calls(conn: asyncpg.Connection, config: Config, agent_id: str, now: dt.datetime) -> list[PendingCall]:
    """The agent's pending approvals, oldest first, read as `wake approvals --agent` reads them."""
    ttl = dt.timedelta(seconds=config.tools.approval_ttl)
    rows = await approvals.listed(conn, agent_id=agent_id, include_closed=False, limit=AGENT_LISTED)
    return [
        PendingCall(id=a.id, tool=a.tool, arguments=json.dumps(a.arguments, sort_keys=True, ensure_ascii=False, default=str),
                    reason=a.reason, reason_from=a.reason_from, requested_at=a.requested_at, wake_id=a.wake_id, tier=a.tier,
                    expired=a.requested_at <= now - ttl)
        for a in reversed(rows) if a.state == "pending"
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
    wakes = await introspection.recent(conn, agent_id=agent_id, limit=AGENT_LISTED)
    return AgentPage(
        agent_id=agent_id, timezone=agent.timezone, tiers=tiers,
        pauses=[p for p in await controls.active_pauses(conn, now) if p.agent_id == agent_id],
        oneshots=[o for o in await controls.oneshots(conn) if o.agent_id == agent_id],
        live=await live(config, agent_id, now), halted=await memory_ledger.has_open_halt(conn, agent_id),
        findings=found, findings_total=found_total, pins=await pins(conn, agent_id),
        facts=fact_rows, facts_total=fact_total, checks={c.fact_id: c for c in checked},
        commitments=open_commitments, commitments_total=commitments_total, writes=writes, writes_total=writes_total,
        wakes=wakes, marks=await incident_marks(conn, wakes), incidents=await incidents.of_agent(conn, agent_id, AGENT_LISTED),
        memory=await memory_files(conn, config, agent_id, now),
        approvals=await pending_calls(conn, config, agent_id, now),
    )


# -- an agent's replays and eval scorecards (docs/replay.md) ----------------------------------------


def _configured(config: Config, agent_id: str) -> None:
    if agent_id not in config.agents:
        raise NotFound(f"no agent {_clip(agent_id)!r}; configured: {', '.join(config.agents)}")


@dataclass(frozen=True, kw_only=True)
class ReplaysPage:
    agent_id: str
    replays: Sequence[ReplayRecord]  # newest first
    evals: Sequence[EvalRecord]  # newest first; the first is the latest scorecard
    chart: bool  # whether this console can draw a chart (matplotlib, `wake[eval]`)


@dataclass(frozen=True, kw_only=True)
class ReplayPage:
    row: Mapping[str, object]
    transcript: list[ShownTurn]
    calls: Sequence[Mapping[str, object]]  # every call, with what answered it


def can_chart() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


async def replays_page(conn: asyncpg.Connection, config: Config, agent_id: str) -> ReplaysPage:
    _configured(config, agent_id)
    return ReplaysPage(
        agent_id=agent_id, replays=await replays.recent(conn, agent_id=agent_id, limit=AGENT_LISTED),
        evals=await replays.evals_of_agent(conn, agent_id, limit=AGENT_LISTED), chart=can_chart(),
    )


async def resolve_replay(conn: asyncpg.Connection, agent_id: str, text: str) -> uuid.UUID:
    """One of the agent's replays, by a full id or a unique prefix among its replays: another
    agent's replay is not there to match."""
    try:
        found = await replays.resolve_id(conn, text, agent_id)
    except ids.IdLookupError as exc:
        raise NotFound(str(exc)) from exc
    if found is None:
        raise NotFound(f"agent {_clip(agent_id)!r} has no replay matching {_clip(text)!r}")
    return found


async def replay_page(conn: asyncpg.Connection, config: Config, agent_id: str, replay_id: uuid.UUID) -> ReplayPage:
    _configured(config, agent_id)
    record = await replays.get(conn, replay_id)
    if record is None or record.agent_id != agent_id:
        raise NotFound(f"agent {_clip(agent_id)!r} has no replay {replay_id}")
    said = replays.as_dict(record, await replays.transcript(conn, replay_id))
    return ReplayPage(row=record.columns(), transcript=turns(said), calls=said["calls"])


def eval_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise NotFound(f"no eval {_clip(text)!r}: an eval is named by its full id") from None


async def eval_of(conn: asyncpg.Connection, config: Config, agent_id: str, text: str) -> EvalRecord:
    """One stored scorecard of the agent's wakes (`text`: the run's full id)."""
    _configured(config, agent_id)
    found = await replays.eval_of_agent(conn, eval_id(text), agent_id)
    if found is None:
        raise NotFound(f"agent {_clip(agent_id)!r} has no eval {_clip(text)!r}")
    return found
