"""Retractions and claim probes as the harness uses them: the `due_falsifiers` arrival source and
the bodies of `wake retract`, `wake retractions` and `wake probe`.

When a falsifier is due and carries a probe, the harness runs the probe itself before the model
sees anything (plumbing, not a promise the model must remember) and the block says what it found.
The probe always tests the retraction's *pass observation*: `verified`/`verified_missing` mean the
observation that keeps the retraction standing is there. Nothing here settles a verdict.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg

from ledgers import queries, retractions
from surfaces import epistemic_tools, probe
from surfaces.errors import ToolInputError
from wake import clock, logs
from wake.arrival.engine import Found
from wake.context import WakeContext
from wake.errors import InvalidInput, NotFound
from wake.stores import Stores

log = logs.get("wake.epistemic")


@contextlib.contextmanager
def refused_as_invalid() -> Iterator[None]:
    """Refusals (`ToolInputError`) in the body become the CLI's `InvalidInput`."""
    try:
        yield
    except ToolInputError as exc:
        raise InvalidInput(str(exc)) from exc


# -- the arrival source ------------------------------------------------------------------------


async def due_falsifiers(ctx: WakeContext) -> Found:
    """Retractions whose falsifier matured and is unchecked, each with what its probe found now."""
    conf = ctx.config.retractions
    async with ctx.stores.pg_conn() as conn:
        rows, total = await retractions.due(conn, ctx.agent_id, ctx.now, conf.due_shown)
    if not rows:
        return Found(text="No falsifier is due.", rows=0)
    inst = epistemic_tools.instrument(ctx.settings)
    found: dict[uuid.UUID, probe.ProbeResult] = {}
    for row in rows:
        spec = epistemic_tools.spec_of(row)
        if spec is not None:
            found[row.id], _ = await epistemic_tools.run_probe(
                spec, inst=inst, write=ctx.write, agent_id=ctx.agent_id, now=ctx.now, wake_id=ctx.wake_id, retraction_id=row.id,
                store=not ctx.dry_run,  # a dry run's wake has no row for a probe record to name
            )
            if ctx.dry_run:
                ctx.unstored.append(f"the probe of retraction {str(row.id)[:8]}")
            log.info("falsifier.probed", agent=ctx.agent_id, retraction_id=str(row.id), verdict=found[row.id].verdict,
                     instrument=found[row.id].instrument_state, recorded=not ctx.dry_run)
    return Found(text=render_due(rows, total, found, ctx.timezone), rows=total)


def local_date(value: dt.datetime, zone: str) -> str:
    return clock.day(value, zone)


def render_due(rows: list[retractions.Retraction], total: int, found: dict[uuid.UUID, probe.ProbeResult], zone: str) -> str:
    """Deterministic text (no record ids, no check times), so an unchanged ledger hashes the same."""
    shown = f" ({len(rows)} shown, oldest first)" if len(rows) < total else ""
    lines = [
        f"{queries.count_text(total)} falsifier{'s are' if total != 1 else ' is'} due{shown}. "
        "Settle each with settle_falsifier(id, verdict, outcome): "
        "overturned = the retraction stands; upheld = the original claim is restored; unresolvable = it can no longer be checked.",
    ]
    for row in rows:
        lines += [
            f"- {row.id} ({row.row_class}, caught by {row.caught_by}), corrected {local_date(row.corrected_at, zone)}, "
            f"due since {local_date(row.matures_at, zone)}",
            f"  retracted: {row.claim_verbatim}",
            f"  it stood on: {row.stood_on}",
            f"  why wrong: {row.why_wrong}",
            f"  held now: {row.corrected_claim}",
            f"  test: {row.test_procedure}",
            f"  retraction stands (overturned) if: {row.expected_retraction_pass_obs}",
            f"  original restored (upheld) if: {row.overturn_retraction_condition}",
        ]
        result = found.get(row.id)
        if result is not None:
            lines.append(f"  harness probe of the pass observation ({result.spec.describe()}): {probe.note(result)}")
        else:
            lines.append("  no machine-checkable probe is attached: run the test yourself.")
    return "\n".join(lines)


# -- command-line bodies -----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _unfenced(stores: Stores) -> AsyncIterator[asyncpg.Connection]:
    """The operator's own writes from the CLI hold no lease: a plain transaction."""
    async with stores.pg_conn() as conn, conn.transaction():
        yield conn


def writer(stores: Stores) -> epistemic_tools.Writer:
    return lambda: _unfenced(stores)


async def resolve_retraction(conn: asyncpg.Connection, text: str, agent_id: str | None = None) -> uuid.UUID:
    row_id = await retractions.resolve_id(conn, text, agent_id)
    if row_id is None:
        raise NotFound(f"no retraction matches {text!r} (give a full id or a unique prefix)")
    return row_id


