"""Each ledger record's fields are its query's columns, in the query's order (docs/design.md, "Typed values").

PostgreSQL says what a query returns: a prepared statement names its result columns. A record
whose fields differ would fail `from_row` at run time; one whose order differs would change the
key order of the CLI's JSON (`wake outbox --json` prints a record as its columns). Both are caught
here, for every query a record is read from, without running it.
"""

from __future__ import annotations

import dataclasses
import re

import asyncpg
import pytest

from ledgers import (
    actions,
    commitments,
    contact,
    context_events,
    controls,
    costs,
    daybook,
    fact_checks,
    facts,
    introspection,
    memory_ledger,
    memory_sources,
    outbox,
    probes,
    queries,
    recall,
    retractions,
    rows,
    settled,
    slots,
    summaries,
    tool_pins,
    unrecorded,
)

# (ledger.query, the record read from it, the columns the reader takes off before the record)
READS: list[tuple[str, type[rows.Row], tuple[str, ...]]] = [
    ("controls.resume", controls.Pause, ()),
    ("controls.pause_for", controls.Pause, ()),
    ("controls.active_pauses", controls.Pause, ()),
    ("controls.due_oneshots", controls.OneShot, ()),
    ("controls.oneshot", controls.OneShot, ()),
    ("controls.oneshots", controls.OneShot, ()),
    ("slots.holder", slots.Holder, ()),
    ("slots.claim_reading_fence", controls.Pause, ("won", "fence")),
    ("outbox.take_due", outbox.Due, ()),
    ("outbox.get", outbox.Delivery, ()),
    ("outbox.listing", outbox.Delivery, ()),
    ("outbox.of_wake", outbox.DeliveryState, ()),
    ("memory.recent_writes", memory_ledger.MemoryWrite, ("total",)),
    ("memory.findings", memory_ledger.FindingRecord, ("total",)),
    ("memory.finding", memory_ledger.FindingRecord, ()),
    ("memory.last_audit", memory_ledger.AuditMark, ()),
    ("settled.latest_state", settled.State, ()),
    ("contact.get", contact.Message, ()),
    ("summaries.current", summaries.Summary, ()),
    ("daybook.recent", daybook.Entry, ("total",)),
    ("commitments.open_newest", commitments.Open, ("total",)),
    ("actions.since", actions.Action, ("total",)),
    ("context_events.turns", context_events.Turn, ()),
    ("context_events.last_wake_peak", context_events.Peak, ()),
    ("context_events.archived", context_events.Archived, ()),
    ("context_events.recent", context_events.Event, ()),
    ("probes.recent", probes.ProbeRecord, ()),
    ("recall.search", recall.Hit, ()),
    ("facts.for_arrival", facts.ArrivalFact, ()),
    ("facts.listing", facts.Fact, ("total",)),
    ("fact_checks.fact", fact_checks.CheckedFact, ()),
    ("fact_checks.latest", fact_checks.Check, ("total",)),
    ("fact_checks.history", fact_checks.Check, ("total",)),
    ("retractions.get", retractions.Retraction, ()),
    ("retractions.due", retractions.Retraction, ("total",)),
    ("retractions.list", retractions.Retraction, ("total",)),
    ("retractions.settle", retractions.Settled, ()),
    ("retractions.newest", retractions.Newest, ("total",)),
    ("tool_pins.pins_of", tool_pins.Pin, ()),
    ("tool_pins.open_findings", tool_pins.OpenFinding, ()),
    ("tool_pins.findings", tool_pins.Finding, ()),
    ("tool_pins.accept", tool_pins.Accepted, ()),
    ("unrecorded.unrecorded_oneshots", unrecorded.Unrecorded, ()),
    ("memory_sources.human_messages", memory_sources.Said, ()),
    ("costs.totals", costs.Group, ()),
    ("costs.spent_today", costs.Spent, ()),
]

# Fields a record has that its query may leave out (they have defaults), by query.
ABSENT: dict[str, tuple[str, ...]] = {
    "controls.due_oneshots": ("status",), "controls.oneshot": ("status",),
}


@pytest.mark.parametrize(("query", "record", "dropped"), READS, ids=[q for q, _, _ in READS])
async def test_a_record_has_its_querys_columns_in_order(pg_dsn: str, query: str, record: type[rows.Row], dropped: tuple[str, ...]) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        columns = [a.name for a in (await conn.prepare(queries.all_queries()[query])).get_attributes()]
    finally:
        await conn.close()
    assert [c for c in dropped if c not in columns] == [], "the reader takes off columns the query does not return"
    fields = [f.name for f in dataclasses.fields(record) if f.name not in ABSENT.get(query, ())]
    assert [c for c in columns if c not in dropped] == fields


# (ledger.query, the record each of its `ROW(...)`s is read into, in the order they appear)
ANONYMOUS_ROWS: list[tuple[str, list[type]]] = [
    ("memory.open_findings", [memory_ledger.OpenFinding]),
    ("introspection.previous_settled_both", [introspection.Compared, introspection.Compared, introspection.RecentLine]),
]
_ROW = re.compile(r"\bROW\(([^()]*)\)", re.IGNORECASE)


@pytest.mark.parametrize(("query", "records"), ANONYMOUS_ROWS, ids=[q for q, _ in ANONYMOUS_ROWS])
def test_an_anonymous_row_has_its_records_fields_in_order(query: str, records: list[type]) -> None:
    """A row inside a row (`ROW(...)`, read as a tuple: `ledgers.queries.Part`) has no column names
    PostgreSQL could report, and its record takes its values in order (`rows.Row.from_values`), so
    its columns are checked against the record's fields here, in the query's text."""
    rows_of = [[c.strip() for c in listed.split(",")] for listed in _ROW.findall(queries.all_queries()[query])]
    assert rows_of == [[f.name for f in dataclasses.fields(r)] for r in records]


def test_every_anonymous_row_is_checked() -> None:
    checked = {q for q, _ in ANONYMOUS_ROWS}
    assert sorted(q for q, sql in queries.all_queries().items() if _ROW.search(sql) and q not in checked) == []


def test_from_values_refuses_a_row_of_another_length() -> None:
    values = ("r1", None, None, "schedule")
    assert slots.Holder.from_values(values).trigger == "schedule"
    with pytest.raises(TypeError, match="3 values for the fields"):
        slots.Holder.from_values(values[:3])


def test_from_row_refuses_a_row_that_is_not_the_record() -> None:
    row = {"claimed_by": "r1", "claimed_at": None, "wake_id": None, "trigger": "schedule"}
    assert slots.Holder.from_row(row).claimed_by == "r1"
    with pytest.raises(TypeError, match=r"lacks \['trigger'\]"):
        slots.Holder.from_row({k: v for k, v in row.items() if k != "trigger"})
    with pytest.raises(TypeError, match=r"does not name: \['extra'\]"):
        slots.Holder.from_row({**row, "extra": 1})
    shot = controls.OneShot.from_row({f.name: None for f in dataclasses.fields(controls.OneShot) if f.name != "status"})
    assert shot.status is None  # a field with a default may be absent from the row


def test_a_json_column_is_decoded() -> None:
    row = {"action_id": 1, "surface": "s", "tool": "t", "summary": "x", "arguments": '{"n": 1}', "wake_id": None, "fence": None, "acted_at": None}
    assert actions.Action.from_row(row).arguments == {"n": 1}
    assert actions.Action.from_row({**row, "arguments": {"n": 2}}).arguments == {"n": 2}  # already decoded (jsonb with a codec)
