"""Facts with provenance passports (docs/design.md, "Ledgers").

Every fact carries an `origin` stamped at write time: `did` (the agent's own action or lookup)
or `saw` (told by a human, observed from outside). A `saw` fact must cite the raw message it came
from (`source_ref`, a `human_contact` row) and is attested only when its value passes
`ledgers.attestation.attest` against that message's body; an unattested one is stored with status
`unverified` and never rendered in an arrival. A new value for a key supersedes the active fact:
the old row becomes `superseded` with `superseded_at`, the new row points back with
`supersedes_id`, and the arrival renders the chain under the live fact.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from codecheck import typed_anchors
from ledgers import attestation, contact, queries, rows
from ledgers.errors import FactError
from untrusted import spotlight

ORIGINS = ("did", "saw")
ANCHOR_TYPES = ("file", "message", "wake", "url")  # the {type, ref} anchors; codecheck.typed_anchors has the code ones
KEY_CHARS = 120      # a fact's key on its line is cut to this (before escaping)
VALUE_CHARS = 700    # its value
ANCHOR_CHARS = 160   # each anchor's reference and place
ANCHORS_SHOWN = 6    # the anchors a line names; past them it says how many more
# what a fact's line holds of stored text at most, before escaping (each escape is at most 10 characters)
LINE_CHARS_MAX = KEY_CHARS + VALUE_CHARS + ANCHORS_SHOWN * 2 * ANCHOR_CHARS + 200


@dataclass(frozen=True, kw_only=True)
class Remembered:
    fact_id: uuid.UUID
    status: str
    attestation: attestation.Attestation | None
    supersedes_id: uuid.UUID | None
    key: str = ""  # the fact's key, for the graph anchor's default subject (not part of the answer)

    def as_dict(self) -> dict[str, object]:
        """The answer the remember and supersede tools give the agent: a serialiser of tool JSON,
        whose keys vary with the passport (attestation, supersession, the unverified note), so a dict."""
        out: dict[str, object] = {"fact_id": str(self.fact_id), "status": self.status}
        if self.attestation is not None:
            out["attested"] = self.attestation.attested
            out["attestation"] = self.attestation.reason
        if self.supersedes_id is not None:
            out["supersedes_id"] = str(self.supersedes_id)
        if self.status == "unverified":
            out["note"] = "stored unverified: it will not appear in arrivals until a message attests it"
        return out


@dataclass(frozen=True, kw_only=True)
class ArrivalFact(rows.Row):
    """A row of `for_arrival`: a live fact (`depth` 0) or a predecessor in its chain, its anchors
    as stored with each message or wake anchor's read-time `check`, its days in the agent's zone."""

    json_columns = ("anchors",)

    head_id: uuid.UUID
    depth: int
    fact_id: uuid.UUID
    category: str
    fact_key: str
    fact_value: str
    origin: str
    status: str
    anchors: list[dict[str, object]]
    recorded_on: str
    recorded_day: str
    superseded_day: str | None


@dataclass(frozen=True, kw_only=True)
class Fact(rows.Row):
    """A row of `facts` as the operator lists it (`wake facts`)."""

    json_columns = ("anchors",)

    fact_id: uuid.UUID
    agent_id: str
    category: str
    fact_key: str
    fact_value: str
    origin: str
    status: str
    attested_ref: uuid.UUID | None
    source_ref: uuid.UUID | None
    supersedes_id: uuid.UUID | None
    anchors: list[dict[str, object]]
    wake_id: uuid.UUID | None
    recorded_at: dt.datetime
    superseded_at: dt.datetime | None


_sql = queries.named("facts")
_window = queries.named("fact_window")


def _anchors_json(anchors: object) -> str:
    """Typed anchors (`codecheck.typed_anchors`): provenance ({"type": message|wake|url, "ref": ...}) and
    code anchors (file, import, symbol, env, package, absent), as the JSON text the column stores."""
    try:
        return json.dumps(typed_anchors.to_json(typed_anchors.parse(anchors)))
    except typed_anchors.AnchorError as exc:
        raise FactError(str(exc)) from None


async def _passport(
    conn: asyncpg.Connection, agent_id: str, value: str, origin: str, source_ref: uuid.UUID | None
) -> tuple[str, uuid.UUID | None, attestation.Attestation | None]:
    """(status, attested_ref, attestation) of a new fact."""
    if origin not in ORIGINS:
        raise FactError(f"origin must be 'did' or 'saw', got {origin!r}")
    if source_ref is None:
        if origin == "saw":
            raise FactError("a 'saw' fact must cite the raw message it came from (source_ref)")
        return "active", None, None
    message = await contact.get(conn, agent_id, source_ref)
    if message is None:
        raise FactError(f"source_ref {source_ref} is not a message of agent {agent_id!r} (human_contact)")
    if not message.sealed:  # a forged message attests nothing (docs/isolation.md, "Sealed decisions")
        raise FactError(f"source_ref {source_ref} carries no valid seal: no human's message was stored so (wake verify --chain names it)")
    if origin == "did":
        return "active", None, None
    verdict = attestation.attest(value, message.body)
    return ("active", source_ref, verdict) if verdict.attested else ("unverified", None, verdict)


async def remember(
    conn: asyncpg.Connection, *, agent_id: str, key: str, value: str, origin: str, recorded_at: dt.datetime,
    category: str = "general", source_ref: uuid.UUID | None = None, anchors: list[dict[str, object]] | None = None,
    wake_id: uuid.UUID | None = None, fact_id: uuid.UUID | None = None,
) -> Remembered:
    """Store a new fact (call inside a transaction). A key that already has an active fact is
    refused: a new value for it goes through `supersede`."""
    key, value = key.strip(), value.strip()
    if not key or not value:
        raise FactError("key and value must be non-empty")
    status, attested_ref, verdict = await _passport(conn, agent_id, value, origin, source_ref)
    if status == "active":
        existing = await conn.fetchval(_sql("active_with_key"), agent_id, key)
        if existing is not None:
            raise FactError(f"fact {key!r} is already active ({existing}); use supersede_fact to change its value")
    new_id = await conn.fetchval(
        _sql("insert"), fact_id, agent_id, category, key, value, origin, status, attested_ref, source_ref, None,
        _anchors_json(anchors or []), wake_id, recorded_at,
    )
    return Remembered(fact_id=new_id, status=status, attestation=verdict, supersedes_id=None, key=key)


async def supersede(
    conn: asyncpg.Connection, *, agent_id: str, fact_id: uuid.UUID, value: str, origin: str, recorded_at: dt.datetime,
    source_ref: uuid.UUID | None = None, anchors: list[dict[str, object]] | None = None, wake_id: uuid.UUID | None = None,
    new_fact_id: uuid.UUID | None = None,
) -> Remembered:
    """Replace an active fact's value with a new fact that points back at it (same key).

    An unattested `saw` value cannot unseat an active fact: it is stored `unverified` with its
    `supersedes_id` set, and the old fact stays active.
    """
    value = value.strip()
    if not value:
        raise FactError("value must be non-empty")
    old = await conn.fetchrow(_sql("lock"), fact_id, agent_id)
    if old is None:
        raise FactError(f"no fact {fact_id} for agent {agent_id!r}")
    if old["status"] != "active":
        raise FactError(f"fact {fact_id} is {old['status']}, not active: only an active fact can be superseded")
    status, attested_ref, verdict = await _passport(conn, agent_id, value, origin, source_ref)
    if status == "active":
        await conn.fetchval(_sql("mark_superseded"), fact_id, agent_id, recorded_at)
    new_id = await conn.fetchval(
        _sql("insert"), new_fact_id, agent_id, old["category"], old["fact_key"], value, origin, status, attested_ref,
        source_ref, fact_id, _anchors_json(anchors or []), wake_id, recorded_at,
    )
    return Remembered(fact_id=new_id, status=status, attestation=verdict, supersedes_id=fact_id, key=old["fact_key"])


RETIRED_STATUSES = ("overridden", "expired", "refuted")


async def retire(conn: asyncpg.Connection, *, agent_id: str, fact_id: uuid.UUID, status: str) -> None:
    """Take an active fact out of arrivals with no replacement: `overridden` (a human corrected
    it), `expired` (no longer true with time) or `refuted` (a retraction disproved it)."""
    if status not in RETIRED_STATUSES:
        raise FactError(f"status must be one of {', '.join(RETIRED_STATUSES)}, got {status!r}")
    if await conn.fetchval(_sql("retire"), fact_id, agent_id, status) is None:
        raise FactError(f"no active fact {fact_id} for agent {agent_id!r}")


async def refute(conn: asyncpg.Connection, *, agent_id: str, fact_id: uuid.UUID) -> str:
    """Mark an active fact `refuted` because a retraction names it (call inside the transaction that
    writes the retraction); returns its key. Anything but an active fact of the agent is refused."""
    row = await conn.fetchrow(_sql("lock"), fact_id, agent_id)
    if row is None:
        raise FactError(f"no fact {fact_id} for agent {agent_id!r}")
    if row["status"] != "active":
        raise FactError(f"fact {fact_id} is {row['status']}, not active: only an active fact can be refuted")
    await retire(conn, agent_id=agent_id, fact_id=fact_id, status="refuted")
    return str(row["fact_key"])


@dataclass(frozen=True)
class HeldBack:
    """The unverified facts an arrival holds back: `count` of them among the agent's newest
    `among` facts, or among all of them when `among` is None (it has no more than the cap)."""

    count: int
    among: int | None = None

    def __bool__(self) -> bool:
        return self.count > 0


async def for_arrival(
    conn: asyncpg.Connection, agent_id: str, timezone: str, *, limit: int, chain_depth: int
) -> tuple[list[ArrivalFact], int, HeldBack]:
    """Active facts with their chains (rows ordered head, then its predecessors), the number of
    active facts (counted up to `queries.COUNT_READ`: render it with `queries.count_text`), and the
    unverified ones held back (looked for among the newest `queries.COUNT_CAP` facts only)."""
    found = rows.all_of(ArrivalFact, await conn.fetch(_sql("for_arrival"), agent_id, timezone, limit, chain_depth))
    counts = await conn.fetchrow(_sql("counts"), agent_id, queries.COUNT_READ)
    assert counts is not None  # an aggregate without GROUP BY always returns one row
    held = HeldBack(int(counts["unverified"]), queries.COUNT_CAP if queries.capped(int(counts["scanned"])) else None)
    return found, int(counts["active"]), held


def anchor_text(anchor: dict[str, Any], marks: spotlight.Marks) -> str:
    """` ⟦file ⟪…:path⟫⟧`, ` ⟦import ⟪…:httpcore⟫ in ⟪…:httpx/_transports/default.py⟫, found⟧`,
    ` ⟦absent import ⟪…:redis⟫⟧`: the anchor's kind and what the read-time check found are the
    harness's marks, its reference and place (stored text) are marked data; a `signature` anchor's
    parameters and a `value` anchor's value (canonical one-line source, codecheck.pysource) follow
    its reference inside the span."""
    check = anchor.get("check", "unchecked")
    negated = anchor.get("type") == typed_anchors.ABSENT and isinstance(anchor.get("anchor"), dict)
    inner = anchor["anchor"] if negated else anchor
    where = f" in {marks.span(str(inner['where']), ANCHOR_CHARS)}" if inner.get("where") else ""
    found = "" if check == "unchecked" else f", {'found' if check == 'found' else 'MISSING'}"
    stated = (f"({inner['params']})" if inner.get("type") == "signature" else
              f" = {inner['value']}" if inner.get("type") == "value" else "")  # canonical one-line source (codecheck.pysource)
    kind = spotlight.neutral(f"{'absent ' if negated else ''}{inner.get('type')}")
    ref = f"{inner.get('ref')}{stated}"
    return f" {spotlight.MARK_OPEN}{kind} {marks.span(ref, ANCHOR_CHARS)}{where}{spotlight.neutral(found)}{spotlight.MARK_CLOSE}"


def render_line(row: ArrivalFact, marks: spotlight.Marks) -> str:
    """One fact with its passport: `- ⟦saw, 16 Jul 2026⟧ ⟪…:key⟫: ⟪…:value⟫`, or for a predecessor
    in a chain `  ⟦SUPERSEDED saw, recorded 2026-10-02, superseded 2026-10-21⟧ ⟪…:key⟫: ⟪…:value⟫`.
    The key, the value and the anchors' references are stored text: marked data (`untrusted.spotlight`),
    each on the fact's one line."""
    anchors = "".join(anchor_text(a, marks) for a in row.anchors[:ANCHORS_SHOWN])
    more = spotlight.mark(f"{len(row.anchors) - ANCHORS_SHOWN} more anchors") if len(row.anchors) > ANCHORS_SHOWN else ""
    said = f"{marks.span(row.fact_key, KEY_CHARS)}: {marks.span(row.fact_value, VALUE_CHARS)}{anchors}{' ' + more if more else ''}"
    if row.depth == 0:
        return f"- {spotlight.mark(f'{row.origin}, {row.recorded_on}')} {said}"
    superseded = f", superseded {row.superseded_day}" if row.superseded_day else ""
    passport = spotlight.mark(f"{row.status.upper()} {row.origin}, recorded {row.recorded_day}{superseded}")
    return f"  {'  ' * (row.depth - 1)}{passport} {said}"


async def active_count(conn: asyncpg.Connection, agent_id: str) -> int:
    """The exact number of the agent's active facts (for the operator: `wake facts --check`)."""
    return int(await conn.fetchval(_window("active_count"), agent_id))


async def listing(conn: asyncpg.Connection, agent_id: str, *, include_all: bool, limit: int) -> tuple[list[Fact], int]:
    return rows.counted(Fact, await conn.fetch(_sql("listing"), agent_id, include_all, limit), limit)
