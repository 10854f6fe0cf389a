"""The retraction and claim-probe commands: `wake retract`, `wake retractions`, `wake probe` and
`wake probes` (the logic is in wake.arrival.falsifiers and surfaces.epistemic_tools)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ledgers import probes, retractions
from surfaces import epistemic_tools, probe
from wake import clock
from wake.arrival import falsifiers
from wake.cli import app, render
from wake.cli.app import AGENT_ID, Context, agent_option, default_agent, fail, ledger_conn, ledger_stores, pass_ctx, run_async
from wake.errors import WakeError


def _aware(ctx: click.Context, param: click.Parameter, value: str | None) -> object:
    if value is None:
        return None
    import datetime as dt

    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"expected an ISO 8601 time, got {value!r}") from exc
    if parsed.tzinfo is None:
        raise click.BadParameter(f"expected a time with a UTC offset (e.g. 2026-11-26T10:00+01:00), got {value!r}")
    return parsed


@click.command("retract")
@agent_option()
@click.option("--claim-verbatim", required=True, help="The claim as it was made, word for word.")
@click.option("--stood-on", required=True, help="What the claim rested on.")
@click.option("--why-wrong", required=True, help="Why it was wrong.")
@click.option("--corrected-claim", required=True, help="What is held instead now.")
@click.option("--caught-by", type=click.Choice(retractions.CAUGHT_BY), default="self", show_default=True)
@click.option(
    "--row-class", type=click.Choice(retractions.ROW_CLASSES), default="claim", show_default=True, help="claim: a belief; send: something sent."
)
@click.option("--test-procedure", required=True, help="The falsifier: what to do to test the retraction.")
@click.option("--expected-retraction-pass-obs", required=True, help="Observed if the retraction stands (verdict overturned).")
@click.option("--overturn-retraction-condition", required=True, help="Observed if the original claim was right (verdict upheld); must differ.")
@click.option("--corrected-at", callback=_aware, help="When it was corrected (ISO 8601 with offset). Default: now.")
@click.option("--maturity-days", type=app.DAYS, help="Days until the falsifier is due. Default: retractions.falsifier_maturity_days.")
@click.option("--probe-target", help="A probe of the pass observation: a path inside the probe roots.")
@click.option("--probe-mode", type=click.Choice(probe.MODES), help="exists, missing or contains.")
@click.option("--probe-needle", help="With --probe-mode contains: the literal string.")
@click.option("--probe-negate", is_flag=True, help="With --probe-mode contains: the needle must NOT be there.")
@click.option("--fact", "fact_id", help="The stored fact (full id) this retracts: it is marked refuted in the same transaction.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored row as JSON.")
@pass_ctx
def retract_cmd(
    ctx: Context, /, agent_id: str | None, corrected_at: Any, maturity_days: int | None, fact_id: str | None, as_json: bool, **fields: object,
) -> None:
    """Record a retraction with its typed falsifier. Identical observations are refused (exit 65), and
    so is a --fact that is not one of the agent's active facts."""
    config = ctx.config
    agent = default_agent(config, agent_id)

    async def body() -> Any:
        with falsifiers.refused_as_invalid():
            new = epistemic_tools.new_retraction(agent, fields, corrected_at or clock.now())
            fact = epistemic_tools.fact_ref(fact_id)
        days = config.retractions.falsifier_maturity_days if maturity_days is None else maturity_days
        async with ledger_stores(config) as st:
            async with falsifiers.writer(st)() as conn:
                with falsifiers.refused_as_invalid():
                    return await epistemic_tools.insert_retraction(conn, new, days, fact)

    row = run_async(body)
    if as_json:
        click.echo(render.to_json(row))
    else:
        refuted = f"; fact {fact_id} is marked refuted" if fact_id else ""
        click.echo(f"retraction {row.id} recorded; its falsifier is due from {row.matures_at:%Y-%m-%d %H:%M %Z}{refuted}")


@click.command("retractions")
@click.option("--agent", "agent_id", type=AGENT_ID, help="Only this agent (default: every agent).")
@click.option("--due", is_flag=True, help="Only unchecked falsifiers that have matured by now.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {total, rows}.")
@pass_ctx
def retractions_cmd(ctx: Context, agent_id: str | None, due: bool, limit: int, as_json: bool) -> None:
    """The retraction ledger, newest corrections first, with the exact total."""
    config = ctx.config
    if agent_id:
        default_agent(config, agent_id)

    async def body() -> Any:
        async with ledger_conn(config) as conn:
                return await retractions.listing(conn, agent_id=agent_id, due_at=clock.now() if due else None, limit=limit)

    rows, total = run_async(body)
    zone = config.agents[agent_id].timezone if agent_id else "UTC"
    click.echo(render.to_json({"total": total, "rows": rows}) if as_json else render.retractions(rows, total, zone))


@click.command("probe")
@agent_option()
@click.option("--target", help="A path inside the probe roots (relative to the first root).")
@click.option("--mode", type=click.Choice(probe.MODES), help="exists, missing or contains.")
@click.option("--needle", help="With --mode contains: the literal string, searched byte for byte.")
@click.option("--negate", is_flag=True, help="With --mode contains: the claim is that the needle is NOT there.")
@click.option("--assertion", help="The claim in words, kept with the record; it never changes the verdict.")
@click.option("--retraction", "retraction_ref", help="The retraction (id or unique prefix) this probe bears on.")
@click.option("--self-test", is_flag=True, help="Run only the dual-needle controls, print them; exit 1 if the instrument fails them.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def probe_cmd(
    ctx: Context, agent_id: str | None, target: str | None, mode: str | None, needle: str | None, negate: bool,
    assertion: str | None, retraction_ref: str | None, self_test: bool, as_json: bool,
) -> None:
    """Probe a claim about a file, record it, print the verdict and evidence.

    Exit 0 for verified / verified_missing, 1 for falsified or error. With --self-test: run the
    instrument's dual-needle controls instead (no store is opened).
    """
    config = ctx.config
    inst = epistemic_tools.instrument(config.tool_settings())
    if self_test:
        test = inst.self_test()
        click.echo(render.to_json({"passed": test.passed, "controls": test.controls}) if as_json else render.probe_self_test(test))
        sys.exit(0 if test.passed else 1)
    if not target or not mode:
        raise click.UsageError("give --target and --mode (or --self-test)")
    agent = default_agent(config, agent_id)
    try:
        with falsifiers.refused_as_invalid():
            spec = epistemic_tools.make_spec(target, mode, needle, negate, assertion)
    except WakeError as exc:
        fail(exc)

    async def body() -> Any:
        async with ledger_stores(config) as st:
            rid = None
            if retraction_ref:
                async with st.pg_conn() as conn:
                    rid = await falsifiers.resolve_retraction(conn, retraction_ref, agent)
            return await epistemic_tools.run_probe(spec, inst=inst, write=falsifiers.writer(st), agent_id=agent, now=clock.now(), retraction_id=rid)

    result, record_id = run_async(body)
    if as_json:
        click.echo(render.to_json({"record_id": record_id, "verdict": result.verdict, "evidence": result.evidence,
                                   "instrument": result.instrument_state, "resolved_path": result.resolved_path, "controls": result.controls}))
    else:
        click.echo(render.probe_result(result))
    sys.exit(0 if result.verdict in ("verified", "verified_missing") else 1)


@click.command("probes")
@click.option("--agent", "agent_id", type=AGENT_ID, help="Only this agent (default: every agent).")
@click.option("--retraction", "retraction_ref", help="Only probes of this retraction (id or unique prefix).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON (evidence and controls included).")
@pass_ctx
def probes_cmd(ctx: Context, agent_id: str | None, retraction_ref: str | None, limit: int, as_json: bool) -> None:
    """Recent claim-probe records, newest first."""
    config = ctx.config

    async def body() -> Any:
        async with ledger_conn(config) as conn:
                rid = await falsifiers.resolve_retraction(conn, retraction_ref, agent_id) if retraction_ref else None
                return await probes.recent(conn, agent_id=agent_id, retraction_id=rid, limit=limit)

    rows = run_async(body)
    click.echo(render.to_json(rows) if as_json else render.probe_records(rows))
