"""Tools over the epistemic ledgers: facts, commitments, living summaries, the daybook.

Every one of them writes, so each is declared `mutates=True` and writes only through
`ctx.write()` (the fenced transaction: a wake whose fence is stale writes nothing). Bad input
raises an error whose message says what to fix; the transaction rolls back and nothing is kept.
The model loop, not these tools, records a `last_actions` row for every successful call.

With Neo4j configured, facts and commitments also anchor their entity in the graph
(`surfaces.graph_anchors`): inside the same fenced transaction, and reported in the result's
`graph` field; a graph failure never loses the row.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from codecheck import coverage, names, typed_anchors, workspace
from codecheck.fingerprint import Fingerprint
from ledgers import commitments, daybook, facts, summaries
from ledgers.errors import AlreadyClosed, FactError
from surfaces import graph_anchors
from surfaces.context import ToolContext
from surfaces.registry import Tool, tool

_UUID = {"type": "string", "pattern": "^[0-9a-fA-F-]{32,36}$"}
# Typed anchors (codecheck/typed_anchors.py): what the fact stands on in code, checked against the
# agent's workspace at git HEAD whenever the fact is read, and its provenance.
_ANCHORS = typed_anchors.JSON_SCHEMA
_ORIGIN = {
    "enum": list(facts.ORIGINS),
    "description": "did = your own action or lookup; saw = told by a human or observed (cite the message in source_ref).",
}
# What remember_fact and supersede_fact both take (their `about` and `source_ref` differ in wording).
_FACT_VALUE: dict[str, object] = {
    "value": {"type": "string", "minLength": 1, "maxLength": 2000},
    "origin": _ORIGIN,
    "anchors": _ANCHORS,
    "about_kind": graph_anchors.ABOUT_KIND,
}
# Surfaces: recording and changing beliefs is deliberate work for surface and full wakes (and chat);
# a whisper may tick off a commitment and write its daybook line.
_DELIBERATE = {"chat", "wake.surface", "wake.full"}


def _uuid(value: str | None, name: str) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"{name} must be a UUID, got {value!r}") from None


def _with_inferred(value: str, anchors: list[dict[str, object]] | None) -> list[dict[str, object]]:
    """The anchors as given; when none of them is a code anchor, those read from the value's prose
    (backticked paths and names, quoted imports, $VARS) are added, each marked `inferred`: the
    check reports what it finds for them and never decides on them."""
    given = list(anchors or [])
    if any(isinstance(a, dict) and a.get("type") in (*typed_anchors.CODE_TYPES, typed_anchors.ABSENT) for a in given):
        return given
    return given + typed_anchors.to_json(typed_anchors.infer(value))


NO_CODE_ANCHOR_NOTE = (
    "no code anchor given: this fact is shown 'inconclusive (no code anchor)' in every "
    "arrival, never as settled (anchors read from its prose only report what they find). If it is about code, supersede it "
    "with typed anchors (file, dir, import, symbol, signature, value, env, package, or absent) so it can be verified or refuted."
)


def _anchor_note(ctx: ToolContext, anchors: list[dict[str, object]] | None) -> dict[str, str]:
    """What the answer says when an agent with a workspace gave no code anchor (verify-on-read
    cannot settle the fact)."""
    if ctx.agent_id not in ctx.settings.with_workspace:
        return {}
    given = list(anchors or [])
    if any(isinstance(a, dict) and a.get("type") in (*typed_anchors.CODE_TYPES, typed_anchors.ABSENT) for a in given):
        return {}
    return {"code_anchors": NO_CODE_ANCHOR_NOTE}


LOOKALIKE_WAIT_S = 5.0  # how long a fact tool waits for the workspace's fingerprint to compare names with


async def _fingerprint(ctx: ToolContext) -> Fingerprint | None:
    """The agent's workspace fingerprint at HEAD (normally warm: the daemon builds it at start),
    or None when it has none or it cannot be read now."""
    found = ctx.settings.workspaces.get(ctx.agent_id)
    if found is None:
        return None
    try:
        return await workspace.PROCESS.get(found[0], head_ttl_s=found[1]).fingerprint_within(LOOKALIKE_WAIT_S)
    except workspace.WorkspaceError:
        return None


async def _checked(ctx: ToolContext, value: str, anchors: list[dict[str, object]] | None) -> dict[str, Any]:
    """Refuse an anchor naming a look-alike of a workspace name (`codecheck.names`: one line naming
    both); the answer's `not_checked` when the value claims names or numbers no anchor covers
    (`codecheck.coverage`), so the model can add anchors. Nothing is written on a refusal."""
    try:
        parsed = typed_anchors.parse(list(anchors or []))
    except typed_anchors.AnchorError:
        return {}  # the ledger refuses it, naming the anchor (FactError), as it always did
    if not any(a.is_code for a in parsed):
        return {}
    fakes = names.lookalikes(parsed, await _fingerprint(ctx))
    if fakes:
        i, anchor, why = fakes[0]
        raise FactError(f"anchors[{i}] ({anchor.type}): {why}")
    missing = coverage.uncovered(value, parsed)
    if not missing:
        return {}
    return {"not_checked": (f"{coverage.describe(missing)}: your value states these and no anchor covers them, so this fact "
                            "reads 'partly anchored (... not checked)' in every arrival, never verified. Supersede it with "
                            "anchors for them (signature for parameters, value for a constant, package or import for each "
                            "name, absent for what is not there), or with a value that says only what the anchors check.")}


def _date(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except (ValueError, TypeError):
        raise ValueError(f"due_on must be a calendar date YYYY-MM-DD, got {value!r}") from None


@tool(
    name="remember_fact",
    description=(
        "Store a fact with its provenance passport. origin is required: 'did' for what you did or looked up "
        "yourself, 'saw' for what a human told you (cite the raw message id in source_ref). A 'saw' fact whose "
        "value is not found in the cited message is stored unverified and kept out of your arrivals. Give typed anchors "
        "for a fact about code: it is checked against your workspace at HEAD whenever it is read, and left out of your "
        "arrivals while the code refutes it; a fact without one is shown 'inconclusive (no code anchor)'. When your graph "
        "is configured, an active fact anchors the entity `about` (default: the key) there; the result's 'graph' "
        "field says whether it did."
    ),
    parameters={
        "type": "object",
        "properties": {
            "key": {"type": "string", "minLength": 1, "maxLength": 100},
            "category": {"type": "string", "minLength": 1, "maxLength": 50, "default": "general"},
            "source_ref": {**_UUID, "description": "The human_contact message id the fact came from."},
            "about": {**graph_anchors.ABOUT, "description": "The entity the fact is about in your graph; default: the key."},
            **_FACT_VALUE,
        },
        "required": ["key", "value", "origin"],
        "additionalProperties": False,
    },
    surfaces=_DELIBERATE,
    mutates=True,
)
async def remember_fact(
    ctx: ToolContext, key: str, value: str, origin: str, category: str = "general", source_ref: str | None = None,
    anchors: list[dict[str, object]] | None = None, about: str | None = None, about_kind: str | None = None,
) -> dict[str, object]:
    subject = graph_anchors.about(about)
    checked = await _checked(ctx, value, anchors)
    async with ctx.write() as conn:
        done = await facts.remember(
            conn, agent_id=ctx.agent_id, key=key, value=value, origin=origin, category=category,
            source_ref=_uuid(source_ref, "source_ref"), anchors=_with_inferred(value, anchors), wake_id=ctx.wake_id, recorded_at=ctx.now,
        )
        anchored = await graph_anchors.fact(
            ctx, "remember_fact", fact_id=done.fact_id, status=done.status, name=subject, kind=about_kind, key=done.key,
        )
    return {**done.as_dict(), **anchored, **_anchor_note(ctx, anchors), **checked}


@tool(
    name="supersede_fact",
    description=(
        "Replace an active fact's value with a new one (same key). The old fact is kept as [SUPERSEDED] and shown "
        "under the new one. A 'saw' value not attested by its cited message does not unseat the old fact. When your "
        "graph is configured, the new fact anchors `about` there (default: the old fact's entity, else the key)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "fact_id": _UUID,
            "source_ref": {**_UUID, "description": "The human_contact message id the new value came from."},
            "about": {**graph_anchors.ABOUT, "description": "The entity the fact is about in your graph; default: the old fact's."},
            **_FACT_VALUE,
        },
        "required": ["fact_id", "value", "origin"],
        "additionalProperties": False,
    },
    surfaces=_DELIBERATE,
    mutates=True,
)
async def supersede_fact(
    ctx: ToolContext, fact_id: str, value: str, origin: str, source_ref: str | None = None, anchors: list[dict[str, object]] | None = None,
    about: str | None = None, about_kind: str | None = None,
) -> dict[str, object]:
    old_id = _uuid(fact_id, "fact_id")
    assert old_id is not None
    subject = graph_anchors.about(about)
    checked = await _checked(ctx, value, anchors)
    async with ctx.write() as conn:
        done = await facts.supersede(
            conn, agent_id=ctx.agent_id, fact_id=old_id, value=value, origin=origin,
            source_ref=_uuid(source_ref, "source_ref"), anchors=_with_inferred(value, anchors), wake_id=ctx.wake_id,
            recorded_at=ctx.now,
        )
        anchored = await graph_anchors.fact(
            ctx, "supersede_fact", fact_id=done.fact_id, status=done.status, name=subject, kind=about_kind,
            supersedes_id=old_id, key=done.key,
        )
    return {**done.as_dict(), **anchored, **_anchor_note(ctx, anchors), **checked}


@tool(
    name="add_commitment",
    description=(
        "Record something you committed to do, optionally with a due date (YYYY-MM-DD, a calendar day). When your "
        "graph is configured and you name the entity it is `about`, it anchors that entity there while it is open."
    ),
    parameters={
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 300},
            "due_on": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "about": {**graph_anchors.ABOUT, "description": "The entity the commitment is about in your graph; without it, no anchor."},
            "about_kind": graph_anchors.ABOUT_KIND,
        },
        "required": ["title"],
        "additionalProperties": False,
    },
    surfaces=_DELIBERATE,
    mutates=True,
)
async def add_commitment(
    ctx: ToolContext, title: str, due_on: str | None = None, about: str | None = None, about_kind: str | None = None
) -> dict[str, object]:
    due = _date(due_on)
    subject = graph_anchors.about(about)
    async with ctx.write() as conn:
        commitment_id = await commitments.add(conn, agent_id=ctx.agent_id, title=title, due_on=due, created_at=ctx.now, wake_id=ctx.wake_id)
        anchored = await graph_anchors.commitment(ctx, "add_commitment", commitment_id=commitment_id, name=subject, kind=about_kind)
    return {"commitment_id": commitment_id, "status": "open", **({"due_on": due.isoformat()} if due else {}), **anchored}


@tool(
    name="complete_commitment",
    description=(
        "Close an open commitment: status 'done' (default) or 'dropped', with what came of it. Its graph anchor, "
        "if any, is closed too."
    ),
    parameters={
        "type": "object",
        "properties": {
            "commitment_id": {"type": "integer", "minimum": 1},
            "status": {"enum": list(commitments.CLOSED_STATUSES), "default": "done"},
            "outcome": {"type": "string", "maxLength": 1000},
        },
        "required": ["commitment_id"],
        "additionalProperties": False,
    },
    surfaces={"chat", "wake"},
    mutates=True,
)
async def complete_commitment(ctx: ToolContext, commitment_id: int, status: str = "done", outcome: str | None = None) -> dict[str, object]:
    try:
        async with ctx.write() as conn:
            await commitments.complete(conn, agent_id=ctx.agent_id, commitment_id=commitment_id, status=status, outcome=outcome, completed_at=ctx.now)
            anchored = await graph_anchors.close_commitment(ctx, "complete_commitment", commitment_id=commitment_id)
    except AlreadyClosed as exc:
        # Closed in the ledger before; if the graph missed that close (Neo4j was down), a second
        # call repairs it. The call is still refused as already done.
        async with ctx.write():
            anchored = await graph_anchors.close_commitment(ctx, "complete_commitment", commitment_id=commitment_id)
        graph_note = f" (graph: {anchored['graph']})" if "graph" in anchored else ""
        raise AlreadyClosed(f"{exc}{graph_note}") from None
    return {"commitment_id": commitment_id, "status": status, **anchored}


@tool(
    name="write_daybook",
    description="Append an entry to your daybook; the newest entries arrive at your next wakes.",
    parameters={
        "type": "object",
        "properties": {"entry": {"type": "string", "minLength": 1, "maxLength": 8000}},
        "required": ["entry"],
        "additionalProperties": False,
    },
    surfaces={"wake"},
    mutates=True,
)
async def write_daybook(ctx: ToolContext, entry: str) -> dict[str, object]:
    async with ctx.write() as conn:
        entry_id = await daybook.append(conn, agent_id=ctx.agent_id, wake_id=ctx.wake_id, entry=entry, written_at=ctx.now)
    return {"entry_id": entry_id}


@tool(
    name="fold_summary",
    description=(
        "Fold a living summary: replace the aspect's text with its next version and say what this fold merged "
        "(the deltas: what changed since the last fold, one short line each). Your next wakes show the text and the deltas. "
        "A summary is derived: it may lag the facts and messages it folds, and they outrank it."
    ),
    parameters={
        "type": "object",
        "properties": {
            "aspect": {"enum": list(summaries.ASPECTS)},
            "content": {"type": "string", "minLength": 1, "maxLength": 4000},
            "deltas": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 300}, "maxItems": 20, "default": []},
        },
        "required": ["aspect", "content"],
        "additionalProperties": False,
    },
    surfaces=_DELIBERATE,
    mutates=True,
)
async def fold_summary(ctx: ToolContext, aspect: str, content: str, deltas: list[str] | None = None) -> dict[str, object]:
    if not content.strip():
        raise ValueError("content must be non-empty")
    merged = [d.strip() for d in deltas or [] if d.strip()]
    async with ctx.write() as conn:
        version = await summaries.fold(conn, agent_id=ctx.agent_id, aspect=aspect, content=content.strip(), deltas=merged, folded_at=ctx.now)
    return {"aspect": aspect, "version": version, "merged": len(merged)}


TOOLS: tuple[Tool, ...] = (remember_fact, supersede_fact, add_commitment, complete_commitment, fold_summary, write_daybook)
