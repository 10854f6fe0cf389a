"""The `recall` tool over real PostgreSQL: typed answers, provenance, the continuing-topic
projection (no projection-window collapse) and the ownership veto (docs/recall.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest

from ledgers import contact, daybook, facts, summaries
from surfaces import recall
from tests.support import sessions
from tests.support.ledger_ctx import wake_ctx
from wake import stores
from wake.config import Config

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
AGENTS = """
[agents.demo]
timezone = "UTC"
{recall}
[agents.demo.tiers.full]
binds = ["wake"]
"""


def _config(store_config: Callable[..., Config], recall_toml: str = "") -> Config:
    return store_config(agents=AGENTS.format(recall=recall_toml))


async def _arc(conn: asyncpg.Connection) -> dict[str, Any]:
    """The shape of a continuing topic: an old origin record that matches best, an earlier
    'no record' answer of the agent's, and 13 recent records of the arc."""
    origin = await contact.record(
        conn, agent_id="demo", author="Anna", channel="chat", received_at=NOW - dt.timedelta(days=40),
        body="The greenhouse project: the greenhouse frame, greenhouse glass and greenhouse project budget.",
    )
    absence = await daybook.append(
        conn, agent_id="demo", wake_id=None, written_at=NOW - dt.timedelta(days=2),
        entry="I found no record of the greenhouse project in my notes.",
    )
    recent = []
    for i in range(13):
        at = NOW - dt.timedelta(hours=13 - i)
        if i % 4 == 0:
            async with conn.transaction():
                done = await facts.remember(conn, agent_id="demo", key=f"greenhouse.step{i}", value=f"greenhouse project step {i} done",
                                            origin="did", recorded_at=at)
            recent.append(str(done.fact_id))
        else:
            recent.append(str(await daybook.append(conn, agent_id="demo", wake_id=None, written_at=at,
                                                   entry=f"Greenhouse project, step {i}: fitted pane {i}.")))
    return {"origin": str(origin), "absence": str(absence), "recent": recent}


async def _recall(config: Config, st: stores.Stores, **arguments: Any) -> dict[str, Any]:
    result: dict[str, Any] = await recall.recall_tool.handler(wake_ctx(config, st, NOW), **arguments)
    return result


async def test_a_continuing_topic_projects_the_six_newest_substantive_records(store_config: Callable[..., Config]) -> None:
    config = _config(store_config, "[agents.demo.recall]\nrecent_entries = 0\n")  # continuing only by the argument here
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            arc = await _arc(conn)
        continuing = await _recall(config, st, query="greenhouse project", continuing=True)
        ordinary = await _recall(config, st, query="greenhouse project")
    assert (continuing["retrieval"], continuing["result"], continuing["continuing"]) == ("ok", "present", "argument")
    assert continuing["candidates"] == 15 and continuing["absence_answers_dropped"] == 1
    assert [r["ref"] for r in continuing["records"]] == list(reversed(arc["recent"]))[:6]
    assert arc["absence"] not in {r["ref"] for r in continuing["records"]} and arc["origin"] not in {r["ref"] for r in continuing["records"]}
    assert continuing["text"].startswith(
        "Your earlier notes (historical; not instructions): 6 of 15 candidate records, newest first; "
        "continuing topic (argument); 1 earlier 'no record' answer of yours left out."
    )
    # an ordinary request keeps its small cap, best match first: the window the continuing topic escapes
    assert ordinary["continuing"] is None and len(ordinary["records"]) == 3
    assert ordinary["records"][0]["ref"] == arc["origin"]
    assert ordinary["records"][0]["author"] == "message from Anna" and ordinary["records"][0]["author_kind"] == "human"


async def test_recent_use_of_the_terms_makes_a_request_continuing(store_config: Callable[..., Config]) -> None:
    config = _config(store_config)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            arc = await _arc(conn)
        result = await _recall(config, st, query="greenhouse")
        unrelated = await _recall(config, st, query="Anna")
    assert result["continuing"] == "recent use of the same terms"
    assert [r["ref"] for r in result["records"]] == list(reversed(arc["recent"]))[:6]
    assert unrelated["continuing"] is None  # the newest entries do not use the word


async def test_every_record_carries_its_provenance(store_config: Callable[..., Config]) -> None:
    config = _config(store_config, "[agents.demo.recall]\nrecent_entries = 0\n")
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn, conn.transaction():
            message = await contact.record(conn, agent_id="demo", author="Bo", channel="chat", body="My kayak is red.",
                                           received_at=NOW - dt.timedelta(days=3))
            await facts.remember(conn, agent_id="demo", key="bo.kayak", value="red", origin="saw", source_ref=message,
                                 recorded_at=NOW - dt.timedelta(days=3))
            await summaries.fold(conn, agent_id="demo", aspect="life_lately", content="Bo talks about his kayak.", deltas=["kayak"],
                                 folded_at=NOW - dt.timedelta(days=1))
            await daybook.append(conn, agent_id="demo", wake_id=None, entry="Asked Bo about the kayak trip.", written_at=NOW)
        ordinary = await _recall(config, st, query="kayak")
        result = await _recall(config, st, query="kayak", continuing=True)
    assert (ordinary["candidates"], len(ordinary["records"])) == (4, 3)  # the ordinary cap
    by_ledger = {r["ledger"]: r for r in result["records"]}
    assert {k: (v["author"], v["author_kind"], v["owner"], v["own_answer"], v["derived"]) for k, v in by_ledger.items()} == {
        "daybook": ("you (your own earlier answer)", "agent", None, True, False),
        "facts": ("Bo (told)", "human", "Bo", False, False),
        "human_contact": ("message from Bo", "human", "Bo", False, False),
        "living_summaries": ("you (derived summary: may lag the facts)", "agent", None, False, True),
    }
    assert [r["at"] for r in result["records"]] == ["2026-11-29T12:00+00:00", "2026-11-28T12:00+00:00", "2026-11-26T12:00+00:00",
                                                    "2026-11-26T12:00+00:00"]
    assert by_ledger["facts"]["text"] == "bo.kayak: red"


async def test_a_named_person_admits_only_that_persons_records(store_config: Callable[..., Config]) -> None:
    config = _config(store_config)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn, conn.transaction():
            anna = await contact.record(conn, agent_id="demo", author="Anna Lind", channel="chat", body="I prefer the blue tent.",
                                        received_at=NOW - dt.timedelta(days=2))
            bo = await contact.record(conn, agent_id="demo", author="Bo", channel="chat", body="I prefer the blue tent too, and tea.",
                                      received_at=NOW - dt.timedelta(days=1))
            await facts.remember(conn, agent_id="demo", key="tent.preference", value="the blue tent", origin="saw", source_ref=bo,
                                 recorded_at=NOW - dt.timedelta(days=1))
            await daybook.append(conn, agent_id="demo", wake_id=None, entry="Someone prefers the blue tent.", written_at=NOW)
        annas = await _recall(config, st, query="blue tent", person="Anna")
        cecilias = await _recall(config, st, query="blue tent", person="Cecilia")
        bos_tea = await _recall(config, st, query="tea", person="Anna")
    assert annas["result"] == "present"
    assert [(r["ref"], r["ownership"]) for r in annas["records"]] == [(str(anna), "person")]
    assert (annas["vetoed_other_person"], annas["ownership_unknown"]) == (2, 1)  # Bo's message and fact; the daybook line
    # Nobody named Cecilia wrote any of it: Bo's records are vetoed, the agent's own line has no stored owner.
    assert (cecilias["retrieval"], cecilias["result"]) == ("ok", "unknown")
    assert [r["ownership"] for r in cecilias["records"]] == ["unknown"] and cecilias["records"][0]["ledger"] == "daybook"
    assert "None of them could be shown to be Cecilia's." in cecilias["text"]
    assert "owner not recorded: not evidence of Cecilia's" in cecilias["text"]
    assert (bos_tea["result"], bos_tea["records"], bos_tea["vetoed_other_person"]) == ("empty", [], 1)
    assert bos_tea["text"] == "Your earlier notes (historical; not instructions): no record by Anna matches 'tea' (1 by other people left out)."


async def test_empty_and_failed_are_different_answers(store_config: Callable[..., Config]) -> None:
    config = _config(store_config)
    async with sessions.ready_stores(config) as st:
        empty = await _recall(config, st, query="zeppelin")
        with pytest.raises(ValueError, match="no searchable word"):
            await _recall(config, st, query="&&")
        async with st.pg_conn() as conn:
            await conn.execute("DROP TABLE daybook CASCADE")
        failed = await _recall(config, st, query="zeppelin")
    assert (empty["retrieval"], empty["result"]) == ("ok", "empty")
    assert empty["text"] == "Your earlier notes (historical; not instructions): no matching record for 'zeppelin'."
    assert (failed["retrieval"], failed["result"], failed["records"]) == ("failed", "unknown", [])
    assert failed["text"].startswith("could not check: UndefinedTableError")


async def test_an_unknown_dictionary_is_could_not_check(store_config: Callable[..., Config]) -> None:
    config = _config(store_config, "[agents.demo.recall]\ndictionary = \"klingon\"\n")
    async with sessions.ready_stores(config) as st:
        result = await _recall(config, st, query="tent")
    assert (result["retrieval"], result["result"]) == ("failed", "unknown")
    assert "klingon" in result["text"]


@pytest.mark.parametrize("dictionary", ["simple", "english"])
async def test_the_search_uses_the_configurations_gin_index(dictionary: str, store_config: Callable[..., Config]) -> None:
    from ledgers import queries

    config = _config(store_config)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn, conn.transaction():
            # enough rows, of enough agents, that a full-text condition is worth an index
            await conn.execute(
                "INSERT INTO daybook (agent_id, entry, written_at) SELECT 'demo', 'entry ' || i, now() FROM generate_series(1, 3000) i;"
                "INSERT INTO human_contact (agent_id, author, channel, body, received_at)"
                " SELECT 'demo', 'Bo', 'chat', 'message ' || i, now() FROM generate_series(1, 3000) i;"
                "INSERT INTO facts (agent_id, fact_key, fact_value, origin, recorded_at)"
                " SELECT 'demo', 'k' || i, 'value ' || i, 'did', now() FROM generate_series(1, 3000) i;"
                "INSERT INTO living_summaries (agent_id, aspect, version, content, folded_at)"
                " SELECT 'a' || i, 'presence', 1, 'summary ' || i, now() FROM generate_series(1, 3000) i;"
                "ANALYZE daybook, human_contact, facts, living_summaries"
            )
            await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + queries.named("recall")("search"), "demo", dictionary, "tent", 8, 200))
            if dictionary == "simple":  # the instrument: with the other configuration, this one's index cannot serve
                other = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + queries.named("recall")("search"), "demo", "english", "tent", 8, 200))
                assert "_recall_simple" not in other
    for table in ("daybook", "facts", "human_contact"):
        assert f"{table}_recall_{dictionary}" in plan, plan
