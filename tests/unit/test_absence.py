"""The absence lexicon (wake.arrival.absence) and the recall tool's pure parts (surfaces.recall)."""

from __future__ import annotations

import datetime as dt

import pytest

from ledgers import recall as recall_ledger
from ledgers.vocab import Result, Retrieval
from surfaces import recall
from wake.arrival import absence
from wake.arrival.engine import Block, CacheTier


def _block(name: str, retrieval: Retrieval) -> Block:
    return Block(
        name=name, cache_tier=CacheTier.volatile, text="", retrieval=retrieval,
        result=Result.unknown if retrieval != Retrieval.ok else Result.empty, reason=None, latency_ms=0.0, rows=0,
    )


BLOCKS = [_block("settled_facts", Retrieval.failed), _block("daybook", Retrieval.failed), _block("provenance_facts", Retrieval.ok)]


@pytest.mark.parametrize(("text", "expected"), [
    ("There are no open commitments.", ["settled_facts"]),
    ("The daybook is empty.", ["daybook"]),
    ("Nothing new since this morning.", ["settled_facts", "daybook"]),  # a generic claim speaks about every failed block
    ("NOTHING IS DUE", ["settled_facts", "daybook"]),
    ("No facts at all.", []),  # provenance_facts could look: its absence claim stands
    ("I wrote two commitments down and checked the daybook.", []),
    ("Nothing is duetime.", []),  # whole words only
])
def test_absence_claims_mark_only_the_failed_blocks_they_speak_about(text: str, expected: list[str]) -> None:
    assert absence.unchecked_claims(text, BLOCKS) == expected


def test_an_operator_source_adds_its_own_phrases() -> None:
    blocks = [_block("orders", Retrieval.failed)]
    assert absence.unchecked_claims("No new orders (a.k.a. none).", blocks) == []
    assert absence.unchecked_claims("No new orders (a.k.a. none).", blocks, {"orders": ["no new orders"]}) == ["orders"]
    assert absence.unchecked_claims("No orders? (a.k.a.)", blocks, {"orders": ["orders?"]}) == ["orders"]  # phrases are literal


def test_a_disabled_block_is_not_an_outage() -> None:
    assert absence.unchecked_claims("Nothing new.", [_block("graph", Retrieval.disabled)]) == []


@pytest.mark.parametrize(("named", "owner", "same"), [
    ("Anna", "Anna", True), ("anna ", "ANNA", True), ("Anna", "Anna Lind", True), ("Anna Lind", "Anna", True),
    ("Anna", "Annika", False), ("Anna Lind", "Anna Berg", False), ("Bo", "Anna Bo", False),
])
def test_same_person(named: str, owner: str, same: bool) -> None:
    assert recall.same_person(named, owner) is same


def _row(ref: str, body: str, hours_ago: int, *, own: bool = True, owner: str | None = None) -> recall_ledger.Hit:
    at = dt.datetime(2026, 11, 29, 12, tzinfo=dt.UTC) - dt.timedelta(hours=hours_ago)
    return recall_ledger.Hit(ref=ref, body=body, at=at, own_answer=own, owner=owner, ledger="daybook", author_kind="agent", derived=False,
                             unchecked_blocks=[], rank=0.0)


def test_a_continuing_projection_keeps_an_absence_answer_when_it_is_all_there_is() -> None:
    only = [_row("a", "I found no record of the boat.", 5)]
    p = recall.project(only, continuing=True, cap=6)
    assert ([r.ref for r in p.records], p.absence_dropped, p.result) == (["a"], 0, "present")
    mixed = [_row("a", "I couldn't find anything about the boat.", 5), _row("b", "Boat painted.", 9), _row("c", "Boat bought.", 1)]
    p = recall.project(mixed, continuing=True, cap=6)
    assert ([r.ref for r in p.records], p.absence_dropped) == (["c", "b"], 1)
    # an ordinary request keeps rank order and its cap, absence answers and all
    assert [r.ref for r in recall.project(mixed, continuing=False, cap=2).records] == ["a", "b"]


def test_a_message_quoting_no_record_is_not_the_agents_absence_answer() -> None:
    assert not recall.is_absence_answer(_row("m", "I found no record of it, said Bo.", 1, own=False))
    assert recall.is_absence_answer(_row("d", "There is no record about the boat.", 1))
