"""`wake replay` (a recorded wake run again against a candidate, stored apart) and `wake eval`
(replays over a selection, scored without a judge); docs/replay.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ledgers.vocab import Status
from wake.cli import render
from wake.cli.app import TIER_CHOICE, Context, ShareType, agent_option, clip, ledger_stores, pass_ctx, resolve_wake, run_async
from wake.errors import NotFound

if TYPE_CHECKING:  # the replay modules are imported by the commands that run (docs/performance.md: commands import what they use)
    import datetime
    import uuid

    import asyncpg

    from ledgers.replays import ReplayRecord
    from wake.replay.evaluate import Scorecard
    from wake.replay.run import Candidate, Outcome

F = TypeVar("F", bound=Callable[..., object])


def shown(text: str) -> str:
    """Text for the operator's terminal: what the model or a tool wrote may hold control
    characters (an escape sequence would drive the terminal); each is shown as its escape."""
    from untrusted.folding import is_control

    return "".join(ch if ch == "\n" or not is_control(ch) else f"\\u{ord(ch):04x}" for ch in text)


SETTLED_STATUSES = [s for s in Status if s != Status.started]


class _ReplayGroup(click.Group):
    """`wake replay ID ...` runs a replay; `wake replay show|list` read the stored ones."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().resolve_command(ctx, args)


def _candidate(config_file: str | None, route: str | None, instructions: str | None, live_readonly: bool) -> Candidate:
    from wake.config import load_config
    from wake.replay.run import Candidate, read_instructions

    candidate_config = None
    if config_file is not None:
        candidate_config = load_config(config_file)  # a bad file is one line and exit 78 (run_async's translation)
    return Candidate(
        route=route, instructions=read_instructions(instructions) if instructions is not None else None, instructions_path=instructions,
        config=candidate_config, config_path=config_file, live_readonly=live_readonly,
    )


def candidate_options(fn: F) -> F:
    fn = click.option("--route", help="Another model route ([models.<name>]) instead of the tier's.")(fn)
    fn = click.option("--instructions", "instructions", type=click.Path(dir_okay=False),
                      help="A file whose text replaces the tier's instructions block.")(fn)
    fn = click.option("--config", "config_file", type=click.Path(dir_okay=False),
                      help="A changed config: the tier's tool_choice, budgets, binding and routes from it.")(fn)
    fn = click.option("--live-readonly", is_flag=True,
                      help="Run calls the recording cannot answer when their tool declares it does not mutate, against the live stores.")(fn)
    return fn


@click.group("replay", cls=_ReplayGroup)
def replay_group() -> None:
    """Replay a recorded wake against a candidate (route, instructions, config); nothing is written to the agent's ledgers."""


@replay_group.command("run")
@click.argument("wake_id")
@candidate_options
@click.option("--json", "as_json", is_flag=True, help="Print the replay and its report as JSON.")
@pass_ctx
def run_cmd(ctx: Context, wake_id: str, route: str | None, instructions: str | None, config_file: str | None, live_readonly: bool,
            as_json: bool) -> None:
    """Rebuild WAKE_ID's first request from the ledger and run the model loop again (an id or a unique prefix)."""
    config = ctx.config

    async def body() -> Outcome:
        from wake.replay import recording
        from wake.replay.run import replay
        from wake.run.session import build_registry
        from wake.think.client import Client

        candidate = _candidate(config_file, route, instructions, live_readonly)
        async with ledger_stores(config) as st:
            async with st.pg_conn() as conn:
                found = await resolve_wake(conn, wake_id)
                recorded = await recording.read(conn, found)
            client = Client()
            try:
                return await replay(st, config, build_registry(candidate.config or config), recorded, candidate, client)
            finally:
                await client.aclose()

    outcome = run_async(body)
    record = outcome.record
    click.echo(render.to_json(record.columns()) if as_json else shown(report_text(record.columns())))


def report_text(r: dict[str, Any]) -> str:
    rep = r["report"]
    old, new = rep["recorded"], rep["replay"]
    lines = [
        f"replay {r['replay_id']} of wake {r['wake_id']} ({r['agent_id']}/{r['tier']}) on route {r['route']} ({r['model']})",
        f"first request: sha256 {r['request_sha256'][:16]}…; arrival "
        + {True: "as recorded", False: "changed from the recording", None: "not comparable (no recorded transcript)"}[r["request_matches"]],
    ]
    if r["live_readonly"]:
        lines.append(f"--live-readonly: read-only tools ran against the live stores ({r['live_calls']} call(s))")
    lines.append(f"out-of-recording calls (never run): {r['out_of_recording']}")
    div = rep["first_divergence"]
    if div is None:
        lines.append("decisions: the same as recorded (every call and the final answer)")
    elif div["kind"] == "call":
        lines.append(f"first divergence: turn {div['turn']}, call {div['call']}: recorded {div['recorded']}, replay {div['replay']}")
        lines.extend("  " + x for x in div.get("arguments_diff") or [])
    else:
        lines.append(f"first divergence: turn {div['turn']}, the final answer")
        lines.extend("  " + x for x in div.get("text_diff") or [])
    lines.append(f"{'':16}{'recorded':>14}{'replay':>14}")
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "turns", "tool_calls", "refusals", "mutating_calls"):
        lines.append(f"{key:16}{old.get(key)!s:>14}{new.get(key)!s:>14}")
    if rep["transcript_diff"]:
        lines.append("transcript diff:")
        lines.extend("  " + x for x in rep["transcript_diff"])
    return "\n".join(lines)


def manifest_lines(r: dict[str, Any]) -> list[str]:
    """A stored replay's manifest: the blocks and tools it sent, by hash, and its roots."""
    m = r["manifest"]
    lines = [f"candidate: {render.to_json(r['candidate']).replace(chr(10), ' ')}",
             f"manifest root {r['manifest_root']}; transcript root {r['transcript_root'] or '-'}", "blocks sent:"]
    lines += [f"  {name:<24} {h}" for name, h in sorted((m.get("blocks") or {}).items())] or ["  (none)"]
    lines.append("tools declared:")
    lines += [f"  {name:<24} {h}" for name, h in sorted((m.get("tools") or {}).items())] or ["  (none)"]
    return lines


@dataclass(frozen=True, kw_only=True)
class Shown:
    """What `wake show REPLAY` prints: the row, and its transcript or its arrival when asked for."""

    record: ReplayRecord
    transcript: dict[str, object] | None = None
    arrival: list[tuple[str, str | None]] | None = None


async def read_shown(conn: asyncpg.Connection, replay_id: uuid.UUID, *, transcript: bool = False, arrival: bool = False) -> Shown:
    """A stored replay as `wake show` and `wake replay show` print it (`replay_id`: resolved)."""
    from ledgers import introspection, replays

    record = await replays.get(conn, replay_id)
    if record is None:
        raise NotFound(f"no replay {replay_id}")
    if transcript:
        return Shown(record=record, transcript=replays.as_dict(record, await replays.transcript(conn, replay_id)))
    if arrival:  # the blocks it sent, in the recorded wake's prompt order (the manifest is a JSON object: no order of its own)
        blocks: dict[str, str] = record.manifest.get("blocks") or {}
        wake = await introspection.get(conn, record.wake_id)
        order = [n for n in (wake.arrival_order if wake is not None else None) or () if n in blocks]
        order += sorted(n for n in blocks if n not in order)
        bodies = await replays.manifest_bodies(conn, [blocks[n] for n in order])
        return Shown(record=record, arrival=[(n, bodies.get(blocks[n])) for n in order])
    return Shown(record=record)


def print_shown(got: Shown, as_json: bool) -> None:
    """Print a stored replay: its report and manifest, or its transcript, or its arrival; or JSON."""
    if got.transcript is not None:
        click.echo(render.to_json(got.transcript) if as_json else render.transcript(got.transcript))
    elif got.arrival is not None:
        click.echo(render.to_json([{"name": n, "text": t} for n, t in got.arrival]) if as_json else render.arrival(got.arrival))
    elif as_json:
        click.echo(render.to_json(got.record.columns()))
    else:
        columns = got.record.columns()
        click.echo(shown("\n".join([report_text(columns), *manifest_lines(columns)])))


async def resolve_replay(conn: asyncpg.Connection, text: str) -> uuid.UUID:
    """A replay id from a full id or a unique prefix."""
    from ledgers import replays

    found = await replays.resolve_id(conn, text)
    if found is None:
        raise NotFound(f"no replay matches {clip(text)} (give a full id or a unique prefix)")
    return found


@replay_group.command("show")
@click.argument("replay_id")
@click.option("--transcript", "show_transcript", is_flag=True, help="Print the replay's conversation: every message and call.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def show_cmd(ctx: Context, replay_id: str, show_transcript: bool, as_json: bool) -> None:
    """Show a stored replay: its report, manifest, or transcript (an id or a unique prefix; `wake show ID` does the same)."""
    config = ctx.config

    async def body() -> Shown:
        async with ledger_stores(config, redis=False) as st, st.pg_conn() as conn:
            return await read_shown(conn, await resolve_replay(conn, replay_id), transcript=show_transcript)

    print_shown(run_async(body), as_json)


def render_text(value: object, limit: int = 400) -> str:
    text = "" if value is None else " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


@replay_group.command("list")
@click.option("--wake", "wake_id", help="Only the replays of this wake (an id or a unique prefix).")
@agent_option()
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def list_cmd(ctx: Context, wake_id: str | None, agent_id: str | None, limit: int, as_json: bool) -> None:
    """The stored replays, newest first."""
    config = ctx.config

    async def body() -> list[ReplayRecord]:
        from ledgers import replays

        async with ledger_stores(config, redis=False) as st, st.pg_conn() as conn:
            of = await resolve_wake(conn, wake_id) if wake_id is not None else None
            return await replays.recent(conn, wake_id=of, agent_id=agent_id, limit=limit)

    rows = run_async(body)
    if as_json:
        click.echo(render.to_json([{k: v for k, v in r.columns().items() if k != "report"} for r in rows]))
        return
    for r in rows:
        same = "same decisions" if r.report.get("same_decisions") else "diverged"
        click.echo(shown(f"{r.started_at:%Y-%m-%d %H:%M:%S} {str(r.replay_id)[:8]} wake {str(r.wake_id)[:8]} {r.agent_id}/{r.tier} "
                         f"{r.route} {r.status} {same} out-of-recording {r.out_of_recording}"))


def _since(value: str | None) -> datetime.datetime | None:
    """An ISO date or time, or a duration back from now (`7d`, `36h`, `90m`)."""
    if value is None:
        return None
    import datetime as dt
    import re

    from wake import clock

    m = re.fullmatch(r"(\d{1,5})([dhm])", value.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        unit_name = {"d": "days", "h": "hours", "m": "minutes"}[unit]
        return clock.now() - dt.timedelta(**{unit_name: n})
    try:
        when = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(f"{clip(value)} is neither an ISO date or time nor a duration like 7d, 36h, 90m", param_hint="--since") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _selection_file(path: str) -> list[str]:
    """A saved selection: one wake id (or unique prefix) a line; blank lines and `#` comments skipped."""
    try:
        from pathlib import Path

        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {clip(path)}: {type(exc).__name__}", param_hint="--select") from None
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


@click.command("eval")
@agent_option()
@click.option("--tier", type=TIER_CHOICE, help="Only this tier's wakes.")
@click.option("--since", help="Only wakes started since (an ISO date or time, or 7d, 36h, 90m back).")
@click.option("--status", type=click.Choice([s.value for s in SETTLED_STATUSES]), help="Only wakes of this status.")
@click.option("--sample", type=click.IntRange(1, 10_000), help="Replay this many of the selected wakes, chosen by --seed.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True, help="The sample's seed: the same seed, the same wakes.")
@click.option("--select", "select_file", type=click.Path(dir_okay=False), help="A saved selection: a file of wake ids, one a line.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=200, show_default=True, help="At most this many wakes before sampling.")
@candidate_options
@click.option("--allow-mutations", is_flag=True, help="The candidate may make more mutating calls than recorded.")
@click.option("--threshold", type=ShareType(), default=0.0, show_default=True,
              help="How far a check's share may fall below the baseline's before the command fails (0.05: five points).")
@click.option("--chart", "chart_path", type=click.Path(dir_okay=False), help="Write the scorecard as a PNG here.")
@click.option("--json", "as_json", is_flag=True, help="Print the scorecard as JSON.")
@pass_ctx
def eval_cmd(ctx: Context, agent_id: str | None, tier: str | None, since: str | None, status: str | None, sample: int | None, seed: int,
             select_file: str | None, limit: int, route: str | None, instructions: str | None, config_file: str | None, live_readonly: bool,
             allow_mutations: bool, threshold: float, chart_path: str | None, as_json: bool) -> None:
    """Replay a selection of recorded wakes against a candidate and score each pair without a judge; exit 1 when a check regresses."""
    config = ctx.config
    since_at = _since(since)
    chosen = _selection_file(select_file) if select_file is not None else None

    async def body() -> Scorecard:
        from ledgers import replays
        from wake.replay import evaluate
        from wake.run.session import build_registry
        from wake.think.client import Client

        candidate = _candidate(config_file, route, instructions, live_readonly)
        async with ledger_stores(config) as st:
            async with st.pg_conn() as conn:
                if chosen is not None:
                    ids = [await resolve_wake(conn, c) for c in chosen]
                else:
                    ids = await replays.selectable(conn, agent_id=agent_id, tier=tier, status=status, since=since_at, limit=limit)
            ids = evaluate.sample(ids, sample, seed)
            if not ids:
                raise NotFound("no recorded wake that called a model matches the selection")
            client = Client()
            try:
                return await evaluate.evaluate(st, config, build_registry(candidate.config or config), ids, candidate, client,
                                               allow_mutations=allow_mutations, threshold=threshold)
            finally:
                await client.aclose()

    from wake.replay import evaluate

    card = run_async(body)
    if chart_path is not None:
        try:
            evaluate.chart(card, chart_path)
        except ImportError:
            click.echo("wake: the chart needs matplotlib (pip install 'wake[eval]'); the scorecard is below", err=True)
    click.echo(render.to_json(card.as_json()) if as_json else shown(evaluate.text(card)))
    if card.regressed:
        names = "; ".join(f"{s.check}: {', '.join(s.wakes) or 'the share fell'}" for s in card.regressed)
        click.echo(f"wake eval: regressed beyond {threshold:g}: {names}", err=True)
        raise SystemExit(1)
