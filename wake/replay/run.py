"""`wake replay`: a recorded wake's first request rebuilt from the ledger and its model loop run again.

The arrival is the recorded one (the stored block texts in the recorded prompt order; the tier's
instructions block replaced with `--instructions`), the tools are the recorded declarations, the
route and the tier's settings (tool choice, budgets) come from the candidate config. The loop is
wake's own (`wake.think.loop.Loop`), with three things kept apart:

- a call that passed the loop's checks is answered from the recording when the recorded wake made
  the same call at that point (the same tool, the same arguments as canonical JSON, at the same
  place among its calls); any other call is never executed: it is answered as not in the
  recording and counted. With `live_readonly`, a tool whose registry declaration says it does not
  mutate runs against the live stores instead; a mutating tool never runs;
- the transcript, the turn measures, the context events and the daily spending stay in memory:
  nothing is written to the agent's ledgers, memory, outbox or Redis;
- the replay is stored whole at the end in `wake_replays` (`ledgers.replays`), with its own
  manifest, transcript and content store.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from ledgers import replays
from ledgers.transcripts import OUTCOMES
from surfaces.conversation import Cut
from surfaces.registry import Registry, Tool
from untrusted import spotlight
from wake import clock, logs, secrets
from wake.arrival.engine import Block, CacheTier
from wake.config import HARNESS_BODY_KEYS, Config, ModelRoute
from wake.context import WakeContext, WakeRequest
from wake.errors import ConfigError, ModelError
from wake.replay import compare
from wake.replay.recording import Recording, arrival_messages, canonical_arguments, message_hash
from wake.stores import Stores
from wake.think import transcript
from wake.think.client import Client, Reply
from wake.think.loop import Loop, Thought
from wake.think.pressure import Pressure
from wake.witness import manifest

NOT_IN_RECORDING = (
    "not in the recording: this is a replay, and the recorded wake made no such call at this point; nothing was run"
)
INSTRUCTIONS_BLOCK = "instructions"


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """What a replay changes: another route, the tier's instructions, another config (None: as recorded / as configured)."""

    route: str | None = None
    instructions: str | None = None  # the new text of the tier's instructions block
    instructions_path: str | None = None
    config: Config | None = None
    config_path: str | None = None
    live_readonly: bool = False

    def as_json(self) -> dict[str, object]:
        return {
            "route": self.route, "instructions": self.instructions_path,
            "instructions_sha256": None if self.instructions is None else manifest.sha256_text(self.instructions),
            "config": self.config_path, "live_readonly": self.live_readonly,
        }


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """A finished replay: its stored row (its report included)."""

    record: replays.ReplayRecord
    messages: list[dict[str, object]]
    calls: list[tuple[str, str]]  # (tool, canonical arguments) of each call the replay's model made


def _never_run(name: str) -> Any:
    async def handler(ctx: object, **arguments: object) -> object:
        raise RuntimeError(f"a replay never runs {name}")  # unreachable: the replay's executor answers every call

    return handler


def recorded_tools(recording: Recording, registry: Registry, binds: tuple[str, ...] | None) -> tuple[list[Tool], dict[str, Tool]]:
    """The replay's binding: each recorded declaration as a tool (the registry's own when it holds the
    same declaration, which says whether it mutates; else mutating, from the stored declaration), by name; with `binds` (a changed tier), only the
    recorded tools it still binds, and the registry's tools it binds that the wake did not hold.
    Returns the binding and the live tools a read-only call could run."""
    live = {t.name: t for t in registry}
    same = {n: t for n, t in live.items() if n in recording.declarations
            and manifest.sha256_declaration(t.declaration()) == manifest.sha256_declaration(recording.declarations[n])}
    bound = None if binds is None else {t.name for t in registry.binding(binds)}
    tools = []
    for name, decl in sorted(recording.declarations.items()):
        if bound is not None and name not in bound:
            continue
        known = same.get(name)
        if known is not None:  # the same declaration: the live tool's, whose key order the request kept (the stored one is canonical)
            tools.append(dataclasses.replace(known, handler=_never_run(name)))
            continue
        tools.append(Tool(
            name=name, description=str(decl.get("description", "")), parameters=dict(decl.get("parameters") or {}),
            version=str(decl.get("version", "")), handler=_never_run(name), mutates=True,
            surfaces=frozenset(), origin="recording",
        ))
    for name in sorted((bound or set()) - set(recording.declarations)):
        t = live[name]
        tools.append(dataclasses.replace(t, handler=_never_run(name)))
        same[name] = t
    return sorted(tools, key=lambda t: t.name), same


class _NoDailyCap:
    """The daily spending of a replay: counted here, never in the agent's Redis key, never capped."""

    cap_usd: float | None = None

    def __init__(self) -> None:
        self.total = 0.0

    async def spent_usd(self) -> float:
        return self.total

    async def add(self, cost_usd: float) -> float:
        self.total += cost_usd
        return self.total

    def reached(self, total_usd: float) -> bool:
        return False


class _ApartPressure(Pressure):
    """The loop's context pressure, its events kept in the replay (never in `context_events`)."""

    async def event(self, kind: str, reason: str, **fields: object) -> None:
        self.conv.events.append(f"turn {self.conv.turn}: {kind} ({reason})")

    async def _archive(self, cut: Cut, strategy: str) -> int:
        segment = self.conv.next_segment
        self.conv.next_segment += 1
        self.conv.messages[:] = cut.messages
        return segment


class _FirstRequest(Client):
    """The model client, remembering the bytes of the first chat request as `Client.complete` sends them."""

    def __init__(self, inner: Client) -> None:
        super().__init__()
        self.inner = inner
        self.first: bytes | None = None

    async def complete(self, route: ModelRoute, body: Mapping[str, object], *, api_key: secrets.Secret | None = None) -> Reply:
        if self.first is None:  # the payload as `Client.complete` builds it (tests hold it to the server's bytes)
            extra = {k: v for k, v in route.extra_body.items() if k not in body and k not in HARNESS_BODY_KEYS}
            self.first = json.dumps({"model": route.model, **body, **extra}, ensure_ascii=False).encode("utf-8")
        return await self.inner.complete(route, body, api_key=api_key)

    async def count_prompt_tokens(self, route: ModelRoute, body: Mapping[str, object], *, api_key: secrets.Secret | None = None) -> int | None:
        return await self.inner.count_prompt_tokens(route, body, api_key=api_key)


class ReplayLoop(Loop):
    """wake's model loop with the recording as its tools' executor, and its records kept in memory."""

    def __init__(
        self, ctx: WakeContext, route_name: str, route: ModelRoute, arrival: list[dict[str, object]], client: Client, recording: Recording,
        live: Mapping[str, Tool], live_readonly: bool,
    ) -> None:
        super().__init__(ctx, route_name, route, (), client, arrival=arrival)
        self.daily: Any = _NoDailyCap()
        self.pressure = _ApartPressure(ctx, self.conv, self._summarize)
        self.recording = recording
        self.live = live
        self.live_readonly = live_readonly
        self.answered: dict[int, tuple[str, bool]] = {}  # call seq -> (answered_from, mutates)
        self.out_of_recording = 0
        self.live_calls = 0
        self.turn_measures: list[dict[str, object]] = []

    async def _record_turn(self, *, turn: int, tokens: int, counted: str, max_tokens: int) -> None:
        self.transcript.observe(self.budget.turns)
        self.turn_measures.append({"turn": turn, "prompt_tokens": tokens, "counted": counted, "max_tokens": max_tokens})

    async def _record_partial(self, stop_reason: str) -> None:
        return None  # a replay's totals go on its own row, written whole at its end

    async def _execute(self, tool: Tool, arguments: dict[str, object], call_id: str, *, started: float) -> str:
        seq = len(self.transcript.calls)
        recorded = self.recording.call_at(seq)
        # compared as the transcript stores them: a recorded argument holding a secret is kept
        # redacted, so the raw one could never equal it
        stored = canonical_arguments(self.transcript.stored_arguments(arguments))
        same = recorded is not None and recorded.tool == tool.name and recorded.arguments == stored
        if recorded is not None and recorded.answer is not None and same:
            self.answered[seq] = ("recorded", tool.mutates)
            # the answer as the model was shown it (marked when recorded): sent as it is, not marked again
            return transcript.ShownAnswer(recorded.answer, recorded.outcome if recorded.outcome in OUTCOMES else "ok")
        live = self.live.get(tool.name)
        if self.live_readonly and not tool.mutates and live is not None and not live.mutates:
            self.live_calls += 1
            self.answered[seq] = ("live", False)
            return await self._run(live, arguments, started)
        self.out_of_recording += 1
        self.answered[seq] = ("out_of_recording", tool.mutates)
        self.log.info("replay.out_of_recording", tool=tool.name, seq=seq, mutates=tool.mutates)
        return transcript.ErrorAnswer(json.dumps({"error": NOT_IN_RECORDING}), "not_run")


def _with_instructions(blocks: tuple[Block, ...], text: str, cache_tier: str) -> tuple[Block, ...]:
    """The blocks with the instructions block's text replaced (added where the tier's sources put
    it, last of its cache tier's settled blocks, when the recorded wake had none)."""
    if any(b.name == INSTRUCTIONS_BLOCK for b in blocks):
        return tuple(dataclasses.replace(b, text=text) if b.name == INSTRUCTIONS_BLOCK else b for b in blocks)
    tier = CacheTier[cache_tier]
    new = Block(name=INSTRUCTIONS_BLOCK, cache_tier=tier, text=text, retrieval=blocks[0].retrieval if blocks else "ok",  # type: ignore[arg-type]
                result=blocks[0].result if blocks else "present", reason=None, latency_ms=0.0, rows=0)  # type: ignore[arg-type]
    at = max((n + 1 for n, b in enumerate(blocks) if b.cache_tier <= tier), default=0)
    return (*blocks[:at], new, *blocks[at:])


def _decided_recorded(recording: Recording) -> list[compare.Decided]:
    return [compare.Decided(turn=c.turn, tool=c.tool, arguments=c.arguments) for c in recording.calls]


async def replay(
    stores: Stores, config: Config, registry: Registry, recording: Recording, candidate: Candidate, client: Client,
) -> Outcome:
    """Run one replay of `recording` against `candidate` and store it apart; the stored row back."""
    row = recording.row
    conf = candidate.config or config
    route_name, route = _route(conf, row.agent_id, str(row.tier), candidate.route)
    tier_conf = conf.tier(row.agent_id, row.tier)
    blocks = recording.blocks
    if candidate.instructions is not None:
        blocks = _with_instructions(blocks, candidate.instructions, tier_conf.instructions_cache_tier)
    tools, live = recorded_tools(recording, registry, tier_conf.binds if candidate.config is not None else None)
    replay_id = uuid.uuid4()
    ctx = WakeContext(
        config=conf, stores=stores, request=WakeRequest(agent_id=row.agent_id, tier=row.tier, trigger=row.trigger, wake_id=replay_id),
        now=row.started_at, binding=tuple(tools), tool_hashes={t.name: manifest.tool_hash(t) for t in tools}, dry_run=True,
    )
    first = _FirstRequest(client)
    arrival = arrival_messages(blocks, spotlight.for_agent(row.agent_id))
    loop = ReplayLoop(ctx, route_name, route, arrival, first, recording, live, candidate.live_readonly)
    arrival_hashes = tuple(message_hash(m) for m in loop.messages[:2])
    started_at, started = clock.now(), clock.monotonic_ms()
    thought = await _think(loop)
    duration_ms = max(0.0, clock.monotonic_ms() - started)
    rec = loop.transcript
    calls = [replays.ReplayCall(call=c, answered_from=loop.answered.get(c.seq, ("checked", False))[0],
                                mutates=loop.tools[c.tool].mutates if c.tool in loop.tools else False) for c in rec.calls]
    contents, block_hashes = _contents(rec, blocks, tools)
    mani = manifest.of_hashes(row.agent_id, row.tier, block_hashes, dict(ctx.tool_hashes))
    messages = [json.loads(contents[m.sha256][1]) if m.sha256 in contents else {} for m in rec.messages]
    usage = loop.budget.usage
    replayed = [compare.Decided(turn=c.turn, tool=c.tool, arguments=_arguments(contents, c.arguments_sha256)) for c in rec.calls]
    divergence = compare.first_divergence(_decided_recorded(recording), replayed, recording.final_text, thought.final_text)
    request_matches = None if not recording.arrival_hashes else arrival_hashes == recording.arrival_hashes
    stop_reason = thought.thinking.stop_reason if thought.thinking else None
    report: dict[str, object] = {
        "same_decisions": divergence is None, "first_divergence": divergence,
        "transcript_diff": compare.transcript_diff(list(recording.messages), messages),
        "recorded": _recorded_summary(recording, live),
        "replay": _replay_summary(thought, loop, route.model, calls, duration_ms),
        "turn_measures": loop.turn_measures, "context_events": list(loop.conv.events),
        "request_matches": request_matches,
    }
    record = replays.ReplayRecord(
        replay_id=replay_id, wake_id=row.wake_id, agent_id=row.agent_id, tier=str(row.tier), route=route_name, model=route.model,
        candidate=candidate.as_json(), live_readonly=candidate.live_readonly,
        request_sha256=hashlib.sha256(first.first or b"").hexdigest(), request_matches=request_matches,
        manifest={"blocks": block_hashes, "tools": dict(ctx.tool_hashes)}, manifest_root=mani.root, transcript_root=rec.root,
        status="completed" if thought.status == "completed" else "failed", stop_reason=stop_reason, note=thought.note,
        error=logs.redact_text(thought.error) if thought.error else None, final_text=thought.final_text, prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens, cached_tokens=usage.cached_tokens, cost_usd=Decimal(str(round(usage.cost_usd, 8))),
        turns=loop.budget.turns, tool_calls=loop.budget.tool_calls, refusals=loop.refusals, out_of_recording=loop.out_of_recording,
        live_calls=loop.live_calls, report=report, duration_ms=duration_ms, started_at=started_at,
        finished_at=started_at + dt.timedelta(milliseconds=duration_ms),
    )
    async with stores.pg_conn() as conn:
        await replays.insert(conn, record, contents, rec.messages, calls)
    return Outcome(record=record, messages=messages, calls=[(d.tool, d.arguments) for d in replayed])


async def _think(loop: ReplayLoop) -> Thought:
    """The replay's model loop run, its turns observed by the transcript."""
    try:
        thought = await loop.run()
    except ModelError as exc:  # (the loop turns these into a failed thought; kept for a client that raises)
        thought = Thought(status="failed", note=str(exc), error=str(exc), thinking=loop.thinking("error"), final_text=None)  # type: ignore[arg-type]
    loop.transcript.observe(loop.budget.turns)
    return thought


def _arguments(contents: Mapping[str, tuple[str, str]], sha256: str | None) -> str:
    """A replayed call's arguments as canonical JSON, from the content store ("" when not stored)."""
    return canonical_arguments(json.loads(contents[sha256][1]) if sha256 is not None and sha256 in contents else "")


def _route(conf: Config, agent_id: str, tier: str, asked: str | None) -> tuple[str, ModelRoute]:
    """The route a replay runs on (`asked`, else the tier's own), or a ConfigError that says why none."""
    if agent_id not in conf.agents or tier not in conf.agents[agent_id].tiers:
        raise ConfigError(str(conf.path), f"agents.{agent_id}.tiers.{tier}", "the replayed wake's agent and tier are not in this config")
    route_name = asked or conf.tier(agent_id, tier).model
    if route_name is None:
        raise ConfigError(str(conf.path), f"agents.{agent_id}.tiers.{tier}.model", "no model route: give --route")
    if route_name not in conf.models:
        raise ConfigError(str(conf.path), "models", f"no route {route_name[:64]!r} (routes: {', '.join(sorted(conf.models)) or 'none'})")
    return route_name, conf.models[route_name]


def _contents(rec: transcript.Recorder, blocks: tuple[Block, ...], tools: list[Tool]) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """The replay's content store (the transcript's, its blocks' and its tools' texts by hash) and its blocks' hashes."""
    contents: dict[str, tuple[str, str]] = dict(rec._contents)
    block_hashes = {b.name: manifest.sha256_text(b.text) for b in blocks}
    contents.update({block_hashes[b.name]: ("block", b.text) for b in blocks})
    contents.update({manifest.tool_hash(t): ("tool", manifest.canonical(t.declaration()).decode("utf-8")) for t in tools})
    return contents, block_hashes


def _recorded_summary(recording: Recording, live: Mapping[str, Tool]) -> dict[str, Any]:
    """The recorded wake's side of the report."""
    row = recording.row
    return {
        "status": row.status, "stop_reason": row.stop_reason, "model": row.model, "prompt_tokens": row.prompt_tokens,
        "completion_tokens": row.completion_tokens, "cached_tokens": row.cached_tokens, "cost_usd": float(row.cost_usd),
        "turns": row.turns, "tool_calls": row.tool_calls, "refusals": row.refusals, "final_text": recording.final_text,
        "mutating_calls": sum(1 for c in recording.calls if c.outcome == "ok" and recording.declarations.get(c.tool) is not None
                              and (live.get(c.tool) is None or live[c.tool].mutates)),
        "duration_ms": (row.finished_at - row.started_at).total_seconds() * 1000 if row.finished_at else None,
    }


def _replay_summary(thought: Thought, loop: ReplayLoop, model: str, calls: list[replays.ReplayCall], duration_ms: float) -> dict[str, Any]:
    """The replay's side of the report."""
    usage = loop.budget.usage
    return {
        "status": str(thought.status), "stop_reason": thought.thinking.stop_reason if thought.thinking else None, "model": model,
        "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens, "cached_tokens": usage.cached_tokens,
        "cost_usd": round(usage.cost_usd, 8), "turns": loop.budget.turns, "tool_calls": loop.budget.tool_calls, "refusals": loop.refusals,
        "out_of_recording": loop.out_of_recording, "live_calls": loop.live_calls,
        "mutating_calls": sum(1 for c in calls if c.mutates and c.answered_from != "checked"),
        "final_text": thought.final_text, "duration_ms": round(duration_ms, 3),
    }


def read_instructions(path: str) -> str:
    """An instructions file's text, or one clear line (exit 64) why not."""
    import click

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path[:200]!r}: {type(exc).__name__}", param_hint="--instructions") from None
    return text.strip() or f"The instructions file {Path(path).name} is empty."

