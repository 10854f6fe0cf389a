"""The epistemic tools: `retract`, `settle_falsifier`, `claim_probe`, and what they share with
the harness (probe roots, the instrument, running a probe and recording it).

`retract` and `settle_falsifier` mutate and are bound from the surface tier up; `claim_probe`
writes only its own probe record and is bound at every wake tier. Every write goes through the
wake's fenced transaction (`ctx.write()`). A refused input raises `ToolInputError`, whose message
is written for the model: it names the field and what was expected.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any, cast

import asyncpg

from ledgers import facts, probes, retractions
from ledgers.errors import FactError, RetractionInputError
from surfaces import probe
from surfaces.context import ToolContext, ToolSettings
from surfaces.errors import ToolInputError
from surfaces.registry import Tool, tool

Writer = Callable[[], contextlib.AbstractAsyncContextManager[Any]]


def instrument(settings: ToolSettings, evaluate_fn: probe.Evaluate = probe.evaluate) -> probe.Instrument:
    return probe.Instrument.create(list(settings.probe_roots), settings.probe_max_file_bytes, evaluate_fn)


def make_spec(target: str, mode: str, needle: str | None = None, negate: bool = False, assertion: str | None = None) -> probe.ProbeSpec:
    try:
        return probe.ProbeSpec(target=target, mode=mode, needle=needle, negate=negate, assertion=assertion)
    except probe.ProbeSpecError as exc:
        raise ToolInputError(f"bad probe: {exc}") from exc


def spec_of(row: retractions.Retraction) -> probe.ProbeSpec | None:
    """The probe attached to a retraction row, or None."""
    if row.probe_mode is None or row.probe_target is None:  # the schema's CHECK keeps the two together
        return None
    return probe.ProbeSpec(target=row.probe_target, mode=row.probe_mode, needle=row.probe_needle, negate=row.probe_negate)


async def run_probe(
    spec: probe.ProbeSpec, *, inst: probe.Instrument, write: Writer, agent_id: str, now: dt.datetime,
    wake_id: uuid.UUID | None = None, retraction_id: uuid.UUID | None = None, store: bool = True,
) -> tuple[probe.ProbeResult, uuid.UUID]:
    """Run the instrument (off the event loop) and leave its row in `claim_probe_records`
    (`store=False`, a dry run's: run it and write nothing)."""
    result = await asyncio.to_thread(inst.probe, spec)
    record = probes.ProbeRecord(
        agent_id=agent_id, wake_id=wake_id, retraction_id=retraction_id, target=spec.target, resolved_path=result.resolved_path,
        mode=spec.mode, needle=spec.needle, negate=spec.negate, assertion=spec.assertion, verdict=result.verdict,
        evidence=result.evidence, instrument_state=result.instrument_state, controls=result.controls, checked_at=now,
    )
    if store:
        async with write() as conn:
            await probes.insert(conn, record)
    return result, record.id


def _text(fields: dict[str, Any], key: str) -> str:
    # unchecked on purpose: NewRetraction.validate refuses a missing, blank or non-text field by name
    return cast(str, fields.get(key))


def new_retraction(agent_id: str, fields: dict[str, Any], corrected_at: dt.datetime) -> retractions.NewRetraction:
    """Build and validate a retraction from the tool's or the CLI's fields."""
    spec = None
    if fields.get("probe_target") is not None or fields.get("probe_mode") is not None:
        if not fields.get("probe_target") or not fields.get("probe_mode"):
            raise ToolInputError("bad probe: give both a probe target and a probe mode")
        spec = make_spec(fields["probe_target"], fields["probe_mode"], fields.get("probe_needle"), bool(fields.get("probe_negate")))
    elif fields.get("probe_needle") is not None or fields.get("probe_negate"):
        raise ToolInputError("bad probe: a needle or negate needs a probe target and mode")
    new = retractions.NewRetraction(
        agent_id=agent_id, corrected_at=corrected_at,
        claim_verbatim=_text(fields, "claim_verbatim"), stood_on=_text(fields, "stood_on"), why_wrong=_text(fields, "why_wrong"),
        corrected_claim=_text(fields, "corrected_claim"), test_procedure=_text(fields, "test_procedure"),
        expected_retraction_pass_obs=_text(fields, "expected_retraction_pass_obs"),
        overturn_retraction_condition=_text(fields, "overturn_retraction_condition"),
        caught_by=fields.get("caught_by") or "self", row_class=fields.get("row_class") or "claim",
        probe_target=spec.target if spec else None, probe_mode=spec.mode if spec else None,
        probe_needle=spec.needle if spec else None, probe_negate=spec.negate if spec else False,
    )
    try:
        new.validate()
    except RetractionInputError as exc:
        raise ToolInputError(str(exc)) from exc
    return new


def fact_ref(value: str | None) -> uuid.UUID | None:
    """The fact a retraction names (`fact_id`), as a full uuid."""
    if value is None:
        return None
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise ToolInputError(f"fact_id must be a fact's full uuid, got {value!r}") from None


async def insert_retraction(
    conn: asyncpg.Connection, new: retractions.NewRetraction, maturity_days: int, fact_id: uuid.UUID | None = None,
) -> retractions.Retraction:
    """Insert the retraction (call inside the fenced transaction). One that names a fact marks that
    active fact `refuted` in the same transaction: it leaves the facts block, and the retraction's
    line in the settled-facts block says so."""
    if fact_id is not None:
        try:
            key = await facts.refute(conn, agent_id=new.agent_id, fact_id=fact_id)
        except FactError as exc:
            raise ToolInputError(str(exc)) from exc
        new = retractions.naming_fact(new, fact_id, key)
    try:
        row_id = await retractions.insert(conn, new, maturity_days=maturity_days)
    except RetractionInputError as exc:
        raise ToolInputError(str(exc)) from exc
    row = await retractions.get(conn, row_id)
    assert row is not None
    return row


async def settle(conn: asyncpg.Connection, row_id: uuid.UUID, agent_id: str, verdict: str, outcome: str, now: dt.datetime) -> retractions.Settled:
    try:
        return await retractions.settle(conn, row_id, agent_id, verdict=verdict, outcome=outcome, checked_at=now)
    except RetractionInputError as exc:
        raise ToolInputError(str(exc)) from exc


# -- the tools ---------------------------------------------------------------------------------

_TEXT = {"type": "string", "minLength": 1}
_PROBE_PROPERTIES: dict[str, object] = {
    "target": {"type": "string", "minLength": 1, "description": "A path inside the probe roots (relative to the first root)."},
    "mode": {"type": "string", "enum": list(probe.MODES)},
    "needle": {"type": "string", "minLength": 1, "description": "mode contains only: a literal string, searched byte for byte."},
    "negate": {"type": "boolean", "default": False, "description": "mode contains only: true means the claim is that the needle is NOT there."},
}


@tool(
    name="retract",
    description=(
        "Record that something you held is wrong, with a typed falsifier. expected_retraction_pass_obs is what you "
        "would observe if this retraction is right; overturn_retraction_condition is what you would observe if the "
        "original claim was right after all (they must differ). The falsifier becomes due after a few days. An "
        "optional probe (checked by the harness when due) must test the pass observation. Name the stored fact it "
        "retracts in fact_id: that fact is marked refuted and leaves your facts block."
    ),
    parameters={
        "type": "object",
        "properties": {
            "claim_verbatim": {**_TEXT, "description": "The claim as you made it, word for word."},
            "stood_on": {**_TEXT, "description": "What the claim rested on (a summary, an assumption, an observation)."},
            "why_wrong": {**_TEXT, "description": "Why it was wrong."},
            "corrected_claim": {**_TEXT, "description": "What you hold instead now."},
            "caught_by": {"type": "string", "enum": list(retractions.CAUGHT_BY), "default": "self"},
            "row_class": {"type": "string", "enum": list(retractions.ROW_CLASSES), "default": "claim",
                          "description": "claim: a belief; send: something you sent to someone."},
            "test_procedure": {**_TEXT, "description": "What to do to test the retraction."},
            "expected_retraction_pass_obs": {**_TEXT, "description": "Seen if the retraction stands (verdict overturned)."},
            "overturn_retraction_condition": {**_TEXT, "description": "Seen if the original claim was right (verdict upheld)."},
            "probe": {"type": "object", "properties": _PROBE_PROPERTIES, "required": ["target", "mode"], "additionalProperties": False},
            "fact_id": {"type": "string", "format": "uuid",
                        "description": "The stored fact this retracts, if any: it is marked refuted and leaves your facts block."},
        },
        "required": ["claim_verbatim", "stood_on", "why_wrong", "corrected_claim", "test_procedure",
                     "expected_retraction_pass_obs", "overturn_retraction_condition"],
        "additionalProperties": False,
    },
    surfaces={"chat", "wake.surface"},
    mutates=True,
)
async def retract(ctx: ToolContext, probe: dict[str, object] | None = None, fact_id: str | None = None, **fields: object) -> dict[str, object]:
    if probe:
        fields.update({f"probe_{k}": v for k, v in probe.items()})
    new = new_retraction(ctx.agent_id, fields, ctx.now)
    fact = fact_ref(fact_id)
    async with ctx.write() as conn:
        row = await insert_retraction(conn, new, ctx.settings.falsifier_maturity_days, fact)
    return {"id": str(row.id), "corrected_at": row.corrected_at.isoformat(), "matures_at": row.matures_at.isoformat(),
            "verdict": row.verdict, **({"fact_id": str(fact), "fact_status": "refuted"} if fact else {})}


@tool(
    name="settle_falsifier",
    description=(
        "Settle a due falsifier once: overturned = the retraction stands (the overturn condition did not appear); "
        "upheld = the original claim is restored; unresolvable = it can no longer be checked. Say in outcome what "
        "the test showed."
    ),
    parameters={
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid", "description": "The retraction id from the due falsifiers block."},
            "verdict": {"type": "string", "enum": list(retractions.SETTLED_VERDICTS)},
            "outcome": {**_TEXT, "description": "What the test procedure showed."},
        },
        "required": ["id", "verdict", "outcome"],
        "additionalProperties": False,
    },
    surfaces={"chat", "wake.surface"},
    mutates=True,
)
async def settle_falsifier(ctx: ToolContext, id: str, verdict: str, outcome: str) -> dict[str, object]:
    try:
        row_id = uuid.UUID(id)
    except ValueError as exc:
        raise ToolInputError(f"id must be a retraction's full uuid, got {id!r}") from exc
    async with ctx.write() as conn:
        row = await settle(conn, row_id, ctx.agent_id, verdict, outcome, ctx.now)
    return {"id": str(row.id), "verdict": row.verdict, "meaning": retractions.VERDICT_MEANING[row.verdict],
            "falsifier_checked_at": row.falsifier_checked_at.isoformat()}


@tool(
    name="claim_probe",
    description=(
        "Check a claim about a file inside the probe roots: mode exists, missing, or contains with a literal needle "
        "(negate=true for 'does not contain'). The verdict comes from mode, needle and negate only; assertion is "
        "recorded and never read. Verdicts: verified, verified_missing, falsified, error (with its cause)."
    ),
    parameters={
        "type": "object",
        "properties": {
            **_PROBE_PROPERTIES,
            "assertion": {"type": "string", "description": "Your claim in words, kept with the record; it does not change the verdict."},
            "retraction_id": {"type": "string", "format": "uuid", "description": "The retraction this probe bears on, if any."},
        },
        "required": ["target", "mode"],
        "additionalProperties": False,
    },
    surfaces={"chat", "wake"},
)
async def claim_probe(
    ctx: ToolContext, target: str, mode: str, needle: str | None = None, negate: bool = False, assertion: str | None = None,
    retraction_id: str | None = None,
) -> dict[str, object]:
    spec = make_spec(target, mode, needle, negate, assertion)
    try:
        rid = uuid.UUID(retraction_id) if retraction_id else None
    except ValueError as exc:
        raise ToolInputError(f"retraction_id must be a full uuid, got {retraction_id!r}") from exc
    if rid is not None:
        async with ctx.read() as conn:
            row = await retractions.get(conn, rid)
        if row is None or row.agent_id != ctx.agent_id:
            raise ToolInputError(f"no retraction {rid} for this agent")
    result, record_id = await run_probe(spec, inst=instrument(ctx.settings), write=ctx.write, agent_id=ctx.agent_id, now=ctx.now,
                                        wake_id=ctx.wake_id, retraction_id=rid)
    return {"verdict": result.verdict, "evidence": result.evidence, "instrument": result.instrument_state,
            "note": probe.note(result), "record_id": str(record_id)}


TOOLS: tuple[Tool, ...] = (retract, settle_falsifier, claim_probe)
