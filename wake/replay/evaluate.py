"""`wake eval`: replays over a selection of recorded wakes against one candidate, scored by checks
that need no judge (docs/replay.md, "wake eval").

Each recorded wake (the baseline) is replayed (`wake.replay.run`, stored like any replay) and the
pair is scored:

- `quiet`: a wake that was quiet (its loop completed with no mutating call, its final answer the tier's `ok_token` or
  empty) while its arrival was unchanged from the agent's previous wake (the diff the gate reads)
  stays quiet;
- `clean_calls`: no refused (unbound), unreadable or out-of-recording call;
- `mutations_bounded`: no more mutating calls than recorded (`allow_mutations` lifts it);
- `facts_settled`: every call to a fact-changing tool that names an id names one the arrival showed;
- `completed`: the loop ended as a completed wake does (not a failed model call; a recorded quiet wake completed).

A check applies to a wake or not (`quiet` only to the quiet, unchanged ones); its score is the share
of the wakes it applies to that pass. A check regresses when the candidate's share falls more than
`threshold` below the baseline's; the wakes that passed in the recording and fail in the replay are
named. Tokens and cost are measured per wake and per useful action (a mutating call, a delivery).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wake.arrival import sources
from wake.config import Config
from wake.replay.recording import Recording
from wake.think.gate import COMPARED_TIERS

if TYPE_CHECKING:
    from surfaces.registry import Registry
    from wake.replay.run import Candidate
    from wake.stores import Stores
    from wake.think.client import Client

CHECKS = ("quiet", "clean_calls", "mutations_bounded", "facts_settled", "completed")
# Tools that change facts, and how they name the fact they change (docs/facts.md).
FACT_TOOLS = frozenset({"supersede_fact", "retract", "settle_falsifier"})
_ID_KEY = re.compile(r"(^|_)id$")


@dataclass(frozen=True, kw_only=True)
class Side:
    """One run of a wake, as the checks see it."""

    quiet: bool
    refused: int
    out_of_recording: int
    mutating_calls: int
    deliveries: int
    tokens: int
    cost_usd: float
    completed: bool
    unsettled_fact_calls: int

    @property
    def useful_actions(self) -> int:
        return self.mutating_calls + self.deliveries


@dataclass(frozen=True, kw_only=True)
class Pair:
    wake_id: str
    replay_id: str
    agent_id: str
    tier: str
    started_at: dt.datetime
    baseline: Side
    candidate: Side
    checks: dict[str, tuple[bool, bool] | None]  # (baseline passes, candidate passes); None: not applicable
    first_divergence: dict[str, object] | None


@dataclass(frozen=True, kw_only=True)
class Score:
    check: str
    applicable: int
    baseline: float | None
    candidate: float | None
    delta: float | None
    regressed: bool
    wakes: tuple[str, ...]  # passed in the recording, failed in the replay


@dataclass(frozen=True, kw_only=True)
class Scorecard:
    pairs: tuple[Pair, ...]
    scores: tuple[Score, ...]
    metrics: dict[str, dict[str, float | None]]
    threshold: float
    candidate: dict[str, object] = field(default_factory=dict)
    eval_id: uuid.UUID | None = None  # the stored run's (`wake_replay_evals`), once stored

    @property
    def regressed(self) -> list[Score]:
        return [s for s in self.scores if s.regressed]

    def as_json(self) -> dict[str, object]:
        return {
            "eval_id": None if self.eval_id is None else str(self.eval_id),
            "candidate": self.candidate, "threshold": self.threshold, "wakes": len(self.pairs),
            "checks": [{"check": s.check, "applicable": s.applicable, "baseline": s.baseline, "candidate": s.candidate, "delta": s.delta,
                        "regressed": s.regressed, "wakes": list(s.wakes)} for s in self.scores],
            "metrics": self.metrics,
            "per_wake": [{
                "wake_id": p.wake_id, "replay_id": p.replay_id, "agent_id": p.agent_id, "tier": p.tier, "started_at": p.started_at.isoformat(),
                "checks": {k: None if v is None else {"baseline": v[0], "candidate": v[1]} for k, v in p.checks.items()},
                "diverged": p.first_divergence,
                "baseline": {"tokens": p.baseline.tokens, "cost_usd": p.baseline.cost_usd, "useful_actions": p.baseline.useful_actions},
                "candidate": {"tokens": p.candidate.tokens, "cost_usd": p.candidate.cost_usd, "useful_actions": p.candidate.useful_actions},
            } for p in self.pairs],
            "regressed": [s.check for s in self.regressed],
        }


def is_quiet(final_text: str | None, mutating: int, ok_token: str | None, *, completed: bool) -> bool:
    """Quiet: a loop that completed, made no mutating call and answered nothing or the ok token (a
    failed wake, with no answer at all, is not quiet)."""
    text = (final_text or "").strip()
    return completed and mutating == 0 and (not text or (ok_token is not None and text == ok_token.strip()))


def _arrival_unchanged(recording: Recording) -> bool:
    """The gate's rule (`wake.think.gate`): against the tier's previous wake, the same tools, no
    block gone, and every session or volatile block that does not change on every wake the same."""
    d = recording.row.diff
    if d is None or d.tier.first or d.tier.tools.any or d.tier.blocks.removed:
        return False
    b = d.tier.blocks
    moved = set(b.changed) | set(b.added) | set(b.newly_failing) | set(b.recovered)
    states = recording.row.blocks
    compared = {t.name for t in COMPARED_TIERS}
    return not [n for n in moved if states.get(n, {}).get("cache_tier") in compared
                and not (n in sources.BUILTIN and sources.BUILTIN[n].changes_every_wake)]


def _unsettled(calls: Sequence[tuple[str, dict[str, object]]], arrival_text: str) -> int:
    """Calls of a fact-changing tool naming an id (an argument whose key is `id` or ends `_id`) the arrival never showed."""
    bad = 0
    for tool, arguments in calls:
        if tool not in FACT_TOOLS or not isinstance(arguments, dict):
            continue
        ids = [str(v) for k, v in arguments.items() if _ID_KEY.search(str(k)) and isinstance(v, (str, int)) and str(v)]
        if any(i not in arrival_text for i in ids):
            bad += 1
    return bad


def _parsed(arguments: str) -> dict[str, object]:
    import json

    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def pair_of(recording: Recording, record: Any, config: Config, messages: Sequence[dict[str, object]], replay_calls: Sequence[Any],
            allow_mutations: bool) -> Pair:
    """Score one recorded wake against its replay (`record`: the stored `ReplayRecord`)."""
    row = recording.row
    tier_conf = config.tier(row.agent_id, row.tier) if row.agent_id in config.agents and row.tier in config.agents[row.agent_id].tiers else None
    ok_token = tier_conf.ok_token if tier_conf else None
    delivers = bool(tier_conf.deliver_to) if tier_conf else False
    rep = record.report
    arrival_text = "\n".join(b.text for b in recording.blocks)
    rec_mut = int(rep["recorded"]["mutating_calls"])
    cand_mut = int(rep["replay"]["mutating_calls"])
    base_quiet = is_quiet(recording.final_text, rec_mut, ok_token, completed=row.status in ("completed", "quiet"))
    cand_quiet = is_quiet(record.final_text, cand_mut, ok_token, completed=record.status == "completed")
    baseline = Side(
        quiet=base_quiet, refused=row.refusals, out_of_recording=0, mutating_calls=rec_mut,
        deliveries=int(delivers and row.status == "completed" and not base_quiet), tokens=row.prompt_tokens + row.completion_tokens,
        cost_usd=float(row.cost_usd), completed=row.status in ("completed", "quiet"),  # a quiet wake's loop completed too
        unsettled_fact_calls=_unsettled([(c.tool, _parsed(c.arguments)) for c in recording.calls], arrival_text),
    )
    candidate = Side(
        quiet=cand_quiet, refused=record.refusals, out_of_recording=record.out_of_recording, mutating_calls=cand_mut,
        deliveries=int(delivers and record.status == "completed" and not cand_quiet), tokens=record.prompt_tokens + record.completion_tokens,
        cost_usd=float(record.cost_usd), completed=record.status == "completed",
        unsettled_fact_calls=_unsettled([(tool, _parsed(arguments)) for tool, arguments in replay_calls], arrival_text),
    )
    checks: dict[str, tuple[bool, bool] | None] = {
        "quiet": (True, cand_quiet) if base_quiet and _arrival_unchanged(recording) else None,
        "clean_calls": (baseline.refused == 0, candidate.refused == 0 and candidate.out_of_recording == 0),
        "mutations_bounded": (True, allow_mutations or cand_mut <= rec_mut),
        "facts_settled": (baseline.unsettled_fact_calls == 0, candidate.unsettled_fact_calls == 0),
        "completed": (baseline.completed, candidate.completed),
    }
    return Pair(
        wake_id=str(row.wake_id), replay_id=str(record.replay_id), agent_id=row.agent_id, tier=str(row.tier), started_at=row.started_at,
        baseline=baseline, candidate=candidate, checks=checks, first_divergence=rep.get("first_divergence"),
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _per(total: float, count: int) -> float | None:
    return total / count if count else None


def score(pairs: Sequence[Pair], threshold: float, candidate: dict[str, object] | None = None) -> Scorecard:
    scores = []
    for check in CHECKS:
        applied = [(p, v) for p in pairs if (v := p.checks.get(check)) is not None]
        n = len(applied)
        base = _per(sum(1 for _, v in applied if v[0]), n)
        cand = _per(sum(1 for _, v in applied if v[1]), n)
        delta = None if base is None or cand is None else cand - base
        worse = tuple(p.wake_id for p, v in applied if v[0] and not v[1])
        scores.append(Score(check=check, applicable=n, baseline=base, candidate=cand, delta=delta,
                            regressed=delta is not None and delta < -threshold - 1e-12, wakes=worse))
    metrics: dict[str, dict[str, float | None]] = {}
    for side in ("baseline", "candidate"):
        sides = [getattr(p, side) for p in pairs]
        tokens, cost, useful = sum(s.tokens for s in sides), sum(s.cost_usd for s in sides), sum(s.useful_actions for s in sides)
        metrics[side] = {
            "tokens_per_wake": _mean([float(s.tokens) for s in sides]), "cost_usd_per_wake": _mean([s.cost_usd for s in sides]),
            "useful_actions": float(useful), "tokens_per_useful_action": _per(tokens, useful), "cost_usd_per_useful_action": _per(cost, useful),
        }
    metrics["delta"] = {
        k: (None if metrics["baseline"][k] is None or metrics["candidate"][k] is None else metrics["candidate"][k] - metrics["baseline"][k])  # type: ignore[operator]
        for k in metrics["baseline"]
    }
    return Scorecard(pairs=tuple(pairs), scores=tuple(scores), metrics=metrics, threshold=threshold, candidate=candidate or {})


def sample(ids: Sequence[object], n: int | None, seed: int) -> list[Any]:
    """`n` of the ids, chosen by `seed` (the same seed, the same wakes), in their original order."""
    if n is None or n >= len(ids):
        return list(ids)
    chosen = set(random.Random(seed).sample(range(len(ids)), n))
    return [x for i, x in enumerate(ids) if i in chosen]


def text(card: Scorecard) -> str:
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v * 100:.0f}%"

    stored = "" if card.eval_id is None else f" (stored as eval {card.eval_id})"
    lines = [f"wake eval: {len(card.pairs)} wake(s), threshold {card.threshold:g}{stored}",
             f"{'check':20}{'wakes':>6}{'baseline':>10}{'candidate':>10}{'delta':>8}"]
    for s in card.scores:
        d = "-" if s.delta is None else f"{s.delta * 100:+.0f}%"
        lines.append(f"{s.check:20}{s.applicable:>6}{pct(s.baseline):>10}{pct(s.candidate):>10}{d:>8}{'  REGRESSED' if s.regressed else ''}")
    for k in card.metrics["baseline"]:
        b, c = card.metrics["baseline"][k], card.metrics["candidate"][k]
        lines.append(f"{k:28}{'-' if b is None else f'{b:.6g}':>14}{'-' if c is None else f'{c:.6g}':>14}")
    diverged = [p for p in card.pairs if p.first_divergence is not None]
    lines.append(f"diverged: {len(diverged)} of {len(card.pairs)}")
    for p in diverged:
        where = p.first_divergence or {}
        lines.append(f"  {p.wake_id} (replay {p.replay_id[:8]}): turn {where.get('turn')}, {where.get('kind')}")
    for s in card.regressed:
        lines.append(f"REGRESSED {s.check}: {', '.join(s.wakes) or '(no single wake: the share fell)'}")
    return "\n".join(lines)


def chart(card: Scorecard, path: str) -> None:
    """The scorecard as a PNG file (`wake eval --chart`)."""
    with open(path, "wb") as out:
        out.write(chart_png(card.as_json()))


def chart_png(card: dict[str, Any]) -> bytes:
    """A scorecard (as `Scorecard.as_json` gives it, or as stored) as a PNG: each check's baseline
    and candidate share, side by side, the regressed ones in red. The same drawing for `wake eval
    --chart` and the console. Matplotlib's object API, no pyplot: no global figure state, so the
    console may draw in a worker thread. Raises ImportError without matplotlib (`wake[eval]`)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    checks = card["checks"]
    names = [str(c["check"]) for c in checks]
    base = [float(c["baseline"] or 0.0) * 100 for c in checks]
    cand = [float(c["candidate"] or 0.0) * 100 for c in checks]
    fig = Figure(figsize=(8, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], base, width=0.4, color="#7a8b99")
    ax.bar([x + 0.2 for x in xs], cand, width=0.4,
           color=["#c0392b" if c["regressed"] else "#2e86c1" for c in checks])
    for x, c, v in zip(xs, checks, cand, strict=True):  # the candidate's share written above its bar: a fall to 0% has no bar to see
        if c["candidate"] is not None:
            ax.text(x + 0.2, v + 1, f"{v:.0f}%", ha="center", va="bottom", fontsize=8, color="#c0392b" if c["regressed"] else "#1d2126")
    ax.set_xticks(list(xs), [f"{n}\n({c['applicable']} wakes)" for n, c in zip(names, checks, strict=True)], fontsize=8)
    ax.set_ylim(0, 112)
    ax.set_ylabel("wakes passing (%)")
    ax.set_title(f"wake eval: {card['wakes']} wakes, threshold {float(card['threshold']):g}")
    from matplotlib.patches import Patch

    legend = [Patch(color="#7a8b99", label="baseline (recorded)"), Patch(color="#2e86c1", label="candidate (replay)")]
    if any(c["regressed"] for c in checks):
        legend.append(Patch(color="#c0392b", label="candidate, regressed"))
    ax.legend(handles=legend, loc="lower right", fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def per_agent(card: Scorecard) -> dict[str, Scorecard]:
    """The scorecard of each agent's wakes on their own (what is stored, and what the console shows)."""
    agents = sorted({p.agent_id for p in card.pairs})
    return {a: score([p for p in card.pairs if p.agent_id == a], card.threshold, card.candidate) for a in agents}


async def store(stores: Stores, card: Scorecard, started_at: dt.datetime, finished_at: dt.datetime) -> uuid.UUID:
    """Store the run's scorecards (`wake_replay_evals`, one row per agent); returns the run's id."""
    from ledgers import replays

    eval_id = uuid.uuid4()
    records = [
        replays.EvalRecord(eval_id=eval_id, agent_id=agent, wakes=len(c.pairs), threshold=c.threshold, candidate=c.candidate,
                           regressed=[s.check for s in c.regressed], scorecard=dataclasses.replace(c, eval_id=eval_id).as_json(),
                           started_at=started_at, finished_at=finished_at)
        for agent, c in per_agent(card).items()
    ]
    async with stores.pg_conn() as conn:
        await replays.insert_evals(conn, records)
    return eval_id


async def evaluate(
    stores: Stores, config: Config, registry: Registry, wake_ids: Sequence[uuid.UUID], candidate: Candidate, client: Client, *, allow_mutations: bool,
    threshold: float,
) -> Scorecard:
    """Replay each wake against `candidate` (each replay stored apart), score the pairs and store
    the scorecard (one row per agent, `store`); the returned card carries the run's id."""
    from wake import clock
    from wake.replay import recording
    from wake.replay.run import replay

    started_at = clock.now()
    pairs = []
    conf = candidate.config or config
    for wake_id in wake_ids:
        async with stores.pg_conn() as conn:
            recorded = await recording.read(conn, wake_id)
        out = await replay(stores, config, registry, recorded, candidate, client)
        pairs.append(pair_of(recorded, out.record, conf, out.messages, out.calls, allow_mutations))
    card = score(pairs, threshold, candidate.as_json())
    return dataclasses.replace(card, eval_id=await store(stores, card, started_at, clock.now()))
