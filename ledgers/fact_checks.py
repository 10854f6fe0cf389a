"""`fact_checks`: every check of a fact's code anchors against the workspace at a git HEAD.

A check row says what was found (`status`, `evidence`), at which commit (`head`), when and by
which wake. A `refuted` check also writes a retraction (`retraction_ledger`, caught_by
`reality`), once per fact and cause (the anchors that fail): its id is derived from both, so the
many checks of one fact refuted for the same reason share one retraction, at one HEAD or across
many; a new retraction is written only when the fact fails for another reason. Its typed falsifier is the check itself, run again later: at a
later HEAD, still refuted means the retraction stands (`overturned`), every anchor holding means
the original claim is restored (`upheld`). A later check at another HEAD settles the matured
falsifiers of that fact (`record` does it; an inconclusive check settles nothing).

The fact itself stays `active`: verify-on-read filters it out of every arrival while it is refuted
at HEAD, and lets it back in if the code comes to bear it out.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from codecheck import typed_anchors, verify
from ledgers import queries, retractions, rows
from ledgers.errors import FactCheckError

_TEXT_MAX = 2000  # evidence and retraction fields are clipped to this many characters


@dataclass(frozen=True, kw_only=True)
class Recorded:
    check_id: int
    retraction_id: uuid.UUID | None
    new_retraction: bool
    settled: list[retractions.Settled] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class CheckedFact(rows.Row):
    """The fact a check is about: what its retraction quotes."""

    json_columns = ("anchors",)

    fact_id: uuid.UUID
    fact_key: str
    fact_value: str
    anchors: list[dict[str, Any]]
    recorded_at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Check(rows.Row):
    """A row of `fact_checks`."""

    check_id: int
    fact_id: uuid.UUID
    agent_id: str
    status: str
    evidence: str
    head: str | None
    checked_at: dt.datetime
    wake_id: uuid.UUID | None
    retraction_id: uuid.UUID | None


def _sql(name: str) -> str:
    return queries.load("fact_checks")[name]


_window = queries.named("fact_window")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _TEXT_MAX else text[: _TEXT_MAX - 1] + "…"


def cause(verdict: verify.Verdict) -> str:
    """What refutes a fact, as a stable key: the anchors that fail, in their stored JSON form, sorted."""
    failed = sorted(json.dumps(f.anchor.to_json(), sort_keys=True) for f in verdict.findings if f.outcome == verify.FAILS)
    return "\n".join(failed) if failed else verdict.evidence


def retraction_id(agent_id: str, fact_id: uuid.UUID, verdict: verify.Verdict) -> uuid.UUID:
    """The one retraction of a fact refuted for one cause (`cause`), whatever HEAD it is seen at."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"wake:fact-check:{agent_id}:{fact_id}:{cause(verdict)}")


def _retraction(agent_id: str, fact: CheckedFact, verdict: verify.Verdict, checked_at: dt.datetime) -> retractions.NewRetraction:
    assert verdict.head is not None  # a refuted verdict is always made at a HEAD
    head = verdict.head[:12]
    stored = fact.anchors
    read = verify.stored_anchors(stored)
    described = ("; ".join(a.describe() for a in read if a.is_code) if not isinstance(read, str) else "") or "its anchors"
    failed = [f for f in verdict.findings if f.outcome == verify.FAILS]
    first = failed[0].anchor.describe() if failed else described
    return retractions.NewRetraction(
        id=retraction_id(agent_id, fact.fact_id, verdict),
        agent_id=agent_id,
        claim_verbatim=_clip(f"{fact.fact_key}: {fact.fact_value}"),
        stood_on=_clip(f"fact {fact.fact_id} (recorded {fact.recorded_at:%Y-%m-%d}), anchored on: {described}"),
        why_wrong=_clip(f"checked against the workspace at HEAD {head}: {verdict.evidence}"),
        corrected_claim=_clip(
            f"at HEAD {head} the code does not bear out {fact.fact_key!r}: {'; '.join(f.evidence for f in failed)}"
            if failed else verdict.evidence),
        caught_by="reality",
        row_class="claim",
        test_procedure=_clip(f"check the fact's anchors again at a HEAD later than {head}: {json.dumps(stored[:typed_anchors.MAX_ANCHORS])}"),
        expected_retraction_pass_obs=_clip(f"at the later HEAD the check is still refuted: {first} does not hold"),
        overturn_retraction_condition="at the later HEAD every anchor holds: the check is verified",
        corrected_at=checked_at,
    )


async def record(
    conn: asyncpg.Connection, *, agent_id: str, fact_id: uuid.UUID, verdict: verify.Verdict, checked_at: dt.datetime,
    wake_id: uuid.UUID | None = None, maturity_days: int = retractions.DEFAULT_MATURITY_DAYS,
) -> Recorded:
    """Record one check (call inside a transaction): the check row; for a refuted one its
    retraction, written once per (fact, cause); and the verdicts of this fact's matured reality
    retractions made at another HEAD, which this check tests."""
    if verdict.status not in verify.STATUSES:
        raise FactCheckError(f"status must be one of {', '.join(verify.STATUSES)}, got {verdict.status!r}")
    if verdict.status != verify.INCONCLUSIVE and not verdict.head:
        raise FactCheckError(f"a {verdict.status} check names the HEAD it was made at")
    if checked_at.tzinfo is None:
        raise FactCheckError("checked_at must be timezone-aware")
    fact = rows.one_of(CheckedFact, await conn.fetchrow(_sql("fact"), fact_id, agent_id))
    if fact is None:
        raise FactCheckError(f"no fact {fact_id} for agent {agent_id!r}")
    rid: uuid.UUID | None = None
    new = False
    if verdict.status == verify.REFUTED:
        assert verdict.head is not None
        rid = retraction_id(agent_id, fact_id, verdict)
        new = await retractions.get(conn, rid) is None
        if new:
            await retractions.insert(conn, _retraction(agent_id, fact, verdict, checked_at), maturity_days=maturity_days)
    check_id = await conn.fetchval(
        _sql("insert"), fact_id, agent_id, verdict.status, _clip(verdict.evidence) or verdict.status,
        verdict.head, checked_at, wake_id, rid,
    )
    settled = await _settle(conn, agent_id, fact_id, verdict, checked_at) if verdict.status != verify.INCONCLUSIVE else []
    return Recorded(check_id=check_id, retraction_id=rid, new_retraction=new, settled=settled)


async def _settle(conn: asyncpg.Connection, agent_id: str, fact_id: uuid.UUID, verdict: verify.Verdict,
                  checked_at: dt.datetime) -> list[retractions.Settled]:
    assert verdict.head is not None
    due = await conn.fetch(_sql("matured_reality_retractions"), fact_id, agent_id, checked_at, verdict.head)
    settled = []
    for row in due:
        outcome, meaning = (("overturned", "still refuted") if verdict.status == verify.REFUTED
                            else ("upheld", "every anchor holds"))
        settled.append(await retractions.settle(
            conn, row["id"], agent_id, verdict=outcome, checked_at=checked_at,
            outcome=_clip(f"checked again at HEAD {verdict.head[:12]} (the retraction was made at {row['head'][:12]}): "
                          f"{meaning}: {verdict.evidence}"),
        ))
    return settled


async def refuted_at(conn: asyncpg.Connection, agent_id: str, head: str, fact_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Those of `fact_ids` whose latest check refuted them at `head`: a verdict fixed for that HEAD."""
    if not fact_ids:
        return set()
    return {r["fact_id"] for r in await conn.fetch(_window("refuted_at_head"), agent_id, head, list(fact_ids))}


async def latest(conn: asyncpg.Connection, agent_id: str, limit: int) -> tuple[list[Check], int]:
    """The newest check of each fact, newest first, and how many facts have been checked."""
    return rows.counted(Check, await conn.fetch(_sql("latest"), agent_id, limit), limit)


async def history(conn: asyncpg.Connection, agent_id: str, fact_id: uuid.UUID, limit: int) -> tuple[list[Check], int]:
    """One fact's checks, newest first, and the exact total."""
    return rows.counted(Check, await conn.fetch(_sql("history"), fact_id, agent_id, limit), limit)
