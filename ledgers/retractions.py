"""`retraction_ledger`: disproven beliefs with a typed falsifier that matures and is then due.

A row says what was claimed (`claim_verbatim`), what it stood on, why it was wrong, what is held
instead (`corrected_claim`), who caught it, and how the retraction itself could be wrong: a
`test_procedure`, the observation that means the retraction stands
(`expected_retraction_pass_obs`, verdict `overturned`) and the one that restores the original
claim (`overturn_retraction_condition`, verdict `upheld`). The two observations must differ after
normalization (trimmed, lower-cased, runs of whitespace folded); a CHECK in the schema enforces
the same rule. The falsifier matures `matures_at` (by default 3 days after `corrected_at`) and is
then due at wakes until settled once with a verdict and an outcome.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from ledgers import ids, queries, rows
from ledgers.errors import RetractionInputError

SETTLED_VERDICTS: tuple[str, ...] = ("upheld", "overturned", "unresolvable")
CAUGHT_BY: tuple[str, ...] = ("self", "human", "together", "reality")
ROW_CLASSES: tuple[str, ...] = ("claim", "send")
PROBE_MODES: tuple[str, ...] = ("exists", "missing", "contains")
DEFAULT_MATURITY_DAYS = 3
VERDICT_MEANING: dict[str, str] = {
    "overturned": "the retraction stands (the falsifier's overturn condition did not appear)",
    "upheld": "the original claim is restored (the overturn condition appeared)",
    "unresolvable": "the falsifier can no longer be checked",
}


def normalize_observation(text: str) -> str:
    """The form the polarity CHECK compares: trimmed, lower-cased, whitespace runs folded."""
    return " ".join(text.lower().split())


@dataclass(frozen=True, kw_only=True)
class NewRetraction:
    agent_id: str
    claim_verbatim: str
    stood_on: str
    why_wrong: str
    corrected_claim: str
    test_procedure: str
    expected_retraction_pass_obs: str
    overturn_retraction_condition: str
    corrected_at: dt.datetime
    caught_by: str = "self"
    row_class: str = "claim"
    probe_target: str | None = None
    probe_mode: str | None = None
    probe_needle: str | None = None
    probe_negate: bool = False
    id: uuid.UUID | None = None

    def validate(self) -> None:
        for name in ("claim_verbatim", "stood_on", "why_wrong", "corrected_claim", "test_procedure",
                     "expected_retraction_pass_obs", "overturn_retraction_condition"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise RetractionInputError(f"{name} is required and must not be blank")
        if normalize_observation(self.expected_retraction_pass_obs) == normalize_observation(self.overturn_retraction_condition):
            raise RetractionInputError(
                "expected_retraction_pass_obs and overturn_retraction_condition are the same observation; a falsifier "
                "must name what is seen if the retraction stands AND a different thing seen if the original claim was right"
            )
        if self.caught_by not in CAUGHT_BY:
            raise RetractionInputError(f"caught_by must be one of {', '.join(CAUGHT_BY)}, got {self.caught_by!r}")
        if self.row_class not in ROW_CLASSES:
            raise RetractionInputError(f"row_class must be one of {', '.join(ROW_CLASSES)}, got {self.row_class!r}")
        if self.corrected_at.tzinfo is None:
            raise RetractionInputError("corrected_at must be timezone-aware")
        if (self.probe_target is None) != (self.probe_mode is None):
            raise RetractionInputError("a probe needs both a target and a mode")
        if self.probe_mode is not None and self.probe_mode not in PROBE_MODES:
            raise RetractionInputError(f"probe mode must be one of {', '.join(PROBE_MODES)}, got {self.probe_mode!r}")


@dataclass(frozen=True, kw_only=True)
class Retraction(rows.Row):
    """A row of `retraction_ledger` (`get`, `due`, `listing`)."""

    id: uuid.UUID
    agent_id: str
    claim_verbatim: str
    stood_on: str
    why_wrong: str
    corrected_claim: str
    caught_by: str
    row_class: str
    test_procedure: str
    expected_retraction_pass_obs: str
    overturn_retraction_condition: str
    verdict: str
    corrected_at: dt.datetime
    matures_at: dt.datetime
    falsifier_checked_at: dt.datetime | None
    falsifier_outcome: str | None
    probe_target: str | None
    probe_mode: str | None
    probe_needle: str | None
    probe_negate: bool
    created_at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Settled(rows.Row):
    """A falsifier just settled: its verdict and outcome, and when."""

    id: uuid.UUID
    verdict: str
    falsifier_outcome: str
    falsifier_checked_at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Newest(rows.Row):
    """One of the newest retractions as the settled-facts block shows it: `corrected_on` in the
    agent's zone; `refuted_fact` the key of the fact it names while that fact is refuted."""

    claim_verbatim: str
    corrected_claim: str
    verdict: str
    corrected_on: str
    refuted_fact: str | None


_sql = queries.named("retractions")


def naming_fact(new: NewRetraction, fact_id: uuid.UUID, key: str) -> NewRetraction:
    """The retraction with the fact it refutes named at the head of `stood_on`: `fact <id> (key): ...`,
    the form a refuted-by-reality retraction has too, which the settled-facts block reads back."""
    return dataclasses.replace(new, stood_on=f"fact {fact_id} ({key}): {new.stood_on}")


async def insert(
    conn: asyncpg.Connection, new: NewRetraction, *, maturity_days: int = DEFAULT_MATURITY_DAYS, matures_at: dt.datetime | None = None
) -> uuid.UUID:
    """Validate and insert; returns the id. A CHECK violation becomes `RetractionInputError`."""
    new.validate()
    if maturity_days < 0:
        raise RetractionInputError(f"maturity must be 0 days or more, got {maturity_days}")
    if matures_at is not None and matures_at < new.corrected_at:
        raise RetractionInputError("matures_at must not be before corrected_at")
    row_id = new.id or uuid.uuid4()
    try:
        await conn.fetchval(
            _sql("insert"),
            row_id, new.agent_id, new.claim_verbatim, new.stood_on, new.why_wrong, new.corrected_claim, new.caught_by,
            new.row_class, new.test_procedure, new.expected_retraction_pass_obs, new.overturn_retraction_condition,
            new.corrected_at, new.probe_target, new.probe_mode, new.probe_needle, new.probe_negate, maturity_days, matures_at,
        )
    except asyncpg.CheckViolationError as exc:
        raise RetractionInputError(f"refused by the ledger: {exc.constraint_name or exc}") from exc
    return row_id


async def get(conn: asyncpg.Connection, row_id: uuid.UUID) -> Retraction | None:
    return rows.one_of(Retraction, await conn.fetchrow(_sql("get"), row_id))


async def resolve_id(conn: asyncpg.Connection, text: str, agent_id: str | None = None) -> uuid.UUID | None:
    """A full id, or the one retraction a prefix names (optionally among one agent's rows); None
    when none has the prefix. Raises `ids.BadPrefix` for a prefix too short or not hex,
    `AmbiguousPrefix` when several match."""
    try:
        return uuid.UUID(text)
    except ValueError:
        pass
    low, high = ids.prefix_range(text)
    rows = await conn.fetch(_sql("find_by_prefix"), low, high, agent_id, ids.LISTED_MATCHES)
    return ids.unique(rows, what="retraction", prefix=text, column="id")


async def due(conn: asyncpg.Connection, agent_id: str, now: dt.datetime, limit: int) -> tuple[list[Retraction], int]:
    """Unchecked falsifiers matured by `now`, oldest maturity first, and how many are due, counted
    up to `queries.COUNT_READ`: render it with `queries.count_text`."""
    return rows.counted(Retraction, await conn.fetch(_sql("due"), agent_id, now, limit, queries.COUNT_READ), limit)


async def listing(conn: asyncpg.Connection, *, agent_id: str | None, due_at: dt.datetime | None, limit: int) -> tuple[list[Retraction], int]:
    """Newest corrections first, and the exact total (a COUNT, not the page size)."""
    return rows.counted(Retraction, await conn.fetch(_sql("list"), agent_id, due_at, limit), limit)


async def newest(conn: asyncpg.Connection, agent_id: str, limit: int, timezone: str) -> tuple[list[Newest], int]:
    """The newest retractions (claim, correction, verdict, `corrected_on` in the agent's zone) and
    their total, counted up to `queries.COUNT_READ`: render it with `queries.count_text`."""
    return rows.counted(Newest, await conn.fetch(_sql("newest"), agent_id, limit, timezone, queries.COUNT_READ), limit)


async def settle(
    conn: asyncpg.Connection, row_id: uuid.UUID, agent_id: str, *, verdict: str, outcome: str, checked_at: dt.datetime
) -> Settled:
    """Record the falsifier's verdict and outcome once, once it has matured. Raises
    `RetractionInputError` for a bad verdict, a blank outcome, an unknown row, one already settled,
    or one not yet due: a falsifier tests the correction after time has passed, not at once."""
    if verdict not in SETTLED_VERDICTS:
        raise RetractionInputError(f"verdict must be one of {', '.join(SETTLED_VERDICTS)}, got {verdict!r}")
    if not isinstance(outcome, str) or not outcome.strip():
        raise RetractionInputError("outcome is required: say what the test procedure showed")
    row = await conn.fetchrow(_sql("settle"), row_id, agent_id, verdict, outcome, checked_at)
    if row is not None:
        return Settled.from_row(row)
    existing = await get(conn, row_id)
    if existing is None or existing.agent_id != agent_id:
        raise RetractionInputError(f"no retraction {row_id} for agent {agent_id!r}")
    if existing.verdict == "unchecked":
        raise RetractionInputError(
            f"the falsifier of retraction {row_id} is not due until {existing.matures_at:%Y-%m-%d %H:%M %Z}: "
            "it tests the correction after time has passed, not at once"
        )
    raise RetractionInputError(
        f"retraction {row_id} was already settled as {existing.verdict} at {existing.falsifier_checked_at:%Y-%m-%d %H:%M %Z}"
    )


# -- demo data ---------------------------------------------------------------------------------

DEMO_PROBE_TARGET = "workers/013b4306/artifacts/probe.txt"
DEMO_PROBE_TEXT = "HARNESS PROBE OK\n"


async def seed_demo(conn: asyncpg.Connection, agent_id: str, now: dt.datetime, probe_root: Path) -> None:
    """One retraction whose falsifier matured a day ago, with a probe of its pass observation.

    Creates the probe's target under `probe_root` (which must be the agent config's first probe
    root for the relative target to resolve there). Idempotent: the row id is derived from the agent.
    """
    target = probe_root / DEMO_PROBE_TARGET
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(DEMO_PROBE_TEXT, encoding="utf-8")
    await insert(conn, NewRetraction(
        id=uuid.uuid5(uuid.NAMESPACE_URL, f"wake:demo:retraction:{agent_id}"),
        agent_id=agent_id,
        claim_verbatim="Worker 013b4306 left no artifacts dir on disk at all.",
        stood_on="An intermediate narrative summary of three worker runs, not a directory listing.",
        why_wrong="Copied from the summary instead of read from disk; a stat shows artifacts/probe.txt (17 bytes).",
        corrected_claim="Worker 013b4306 (exit 0) left artifacts/probe.txt, 17 bytes: HARNESS PROBE OK.",
        caught_by="reality",
        row_class="claim",
        test_procedure=f"Read {DEMO_PROBE_TARGET} under the probe root and look for the line HARNESS PROBE OK.",
        expected_retraction_pass_obs="probe.txt is on disk and contains HARNESS PROBE OK.",
        overturn_retraction_condition="There is no probe.txt (or no artifacts dir) for worker 013b4306.",
        corrected_at=now - dt.timedelta(days=DEFAULT_MATURITY_DAYS + 1),
        probe_target=DEMO_PROBE_TARGET,
        probe_mode="contains",
        probe_needle="HARNESS PROBE OK",
    ), maturity_days=DEFAULT_MATURITY_DAYS)
