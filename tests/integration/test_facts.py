"""Facts with provenance over real PostgreSQL: origins, attestation and quarantine, supersession
chains, passports rendered in the arrival."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable

import asyncpg
import pytest

from ledgers import contact, facts
from ledgers.errors import FactError
from tests.support import marked, sessions
from tests.support.ledger_ctx import wake_ctx
from wake.arrival import records as recall
from wake.config import Config

UTC = dt.UTC


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


async def _message(conn: asyncpg.Connection, body: str, when: str = "2026-07-15T10:00:00") -> uuid.UUID:
    message_id = await contact.record(conn, agent_id="demo", author="henke", channel="chat", body=body, received_at=at(when))
    assert message_id is not None
    return message_id


async def test_saw_fact_attested_by_its_message_renders_with_its_passport(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn, conn.transaction():
            m = await _message(conn, "From July my Kvällsskift runs 15:00-23:00.")
            # 22:30 UTC on 15 July is 00:30 on 16 July in Stockholm: the passport shows the agent's day.
            done = await facts.remember(
                conn, agent_id="demo", key="shift_pattern", value="Kvällsskift runs 15:00-23:00", origin="saw",
                source_ref=m, recorded_at=at("2026-07-15T22:30:00"),
            )
            assert done.status == "active" and done.attestation is not None and done.attestation.how == "contained"
            await facts.remember(
                conn, agent_id="demo", key="canary", value="exited 0, 26-byte artifact", origin="did",
                anchors=[{"type": "file", "ref": "workers/canary/probe.txt"}], recorded_at=at("2026-10-21T09:00:00"),
            )
        found = await recall.provenance_facts(wake_ctx(config, st, at("2026-11-01T12:00:00")))
    lines = marked.plain(found.text).splitlines()
    assert "- ⟦saw, 16 Jul 2026⟧ shift_pattern: Kvällsskift runs 15:00-23:00" in lines
    assert "- ⟦did, 21 Oct 2026⟧ canary: exited 0, 26-byte artifact ⟦file workers/canary/probe.txt⟧" in lines
    assert lines.index("- ⟦did, 21 Oct 2026⟧ canary: exited 0, 26-byte artifact ⟦file workers/canary/probe.txt⟧") < lines.index(
        "- ⟦saw, 16 Jul 2026⟧ shift_pattern: Kvällsskift runs 15:00-23:00"
    )  # newest first
    assert found.rows == 2 and "held back" not in found.text


async def test_unattested_saw_fact_is_quarantined_and_never_rendered(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            m = await _message(conn, "We talked about the trip yesterday, it was nice.")
            done = await facts.remember(
                conn, agent_id="demo", key="travel_plan", value="flight to Lisbon booked for 12 December", origin="saw",
                source_ref=m, recorded_at=at("2026-11-01T10:00:00"),
            )
            assert done.status == "unverified" and done.attestation is not None and not done.attestation.attested
            assert "will not appear" in done.as_dict()["note"]
            listed, total = await facts.listing(conn, "demo", include_all=True, limit=10)
            assert total == 1 and listed[0].status == "unverified" and listed[0].attested_ref is None
            assert listed[0].source_ref == m
            assert await facts.listing(conn, "demo", include_all=False, limit=10) == ([], 0)
            # The schema itself refuses an active `saw` fact without attestation.
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute(
                    "INSERT INTO facts (agent_id, fact_key, fact_value, origin, status, source_ref, recorded_at)"
                    " VALUES ('demo', 'k', 'v', 'saw', 'active', $1, now())", m,
                )
        found = await recall.provenance_facts(wake_ctx(config, st, at("2026-11-02T10:00:00")))
    assert "Lisbon" not in found.text and "travel_plan" not in found.text
    assert found.rows == 0
    assert found.text == "No active facts are recorded.\n(1 unverified fact held back: not attested by the message cited)"


async def test_origin_is_required_and_saw_must_cite_a_message_of_the_agent(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            with pytest.raises(FactError, match="origin must be 'did' or 'saw'"):
                await facts.remember(conn, agent_id="demo", key="k", value="v", origin="inferred", recorded_at=at("2026-11-01T10:00:00"))
            with pytest.raises(FactError, match="must cite the raw message"):
                await facts.remember(conn, agent_id="demo", key="k", value="v", origin="saw", recorded_at=at("2026-11-01T10:00:00"))
            other = await contact.record(conn, agent_id="other", author="x", channel="chat", body="k v", received_at=at("2026-11-01T09:00:00"))
            assert other is not None
            with pytest.raises(FactError, match="not a message of agent 'demo'"):
                await facts.remember(conn, agent_id="demo", key="k", value="v", origin="saw", source_ref=other, recorded_at=at("2026-11-01T10:00:00"))
            with pytest.raises(asyncpg.NotNullViolationError):
                await conn.execute("INSERT INTO facts (agent_id, fact_key, fact_value, recorded_at) VALUES ('demo', 'k', 'v', now())")
            assert await facts.listing(conn, "demo", include_all=True, limit=10) == ([], 0)


async def test_supersession_chain_renders_the_superseded_fact_under_the_live_one(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn, conn.transaction():
            old_m = await _message(conn, "Dagskift runs 07:00-16:00 until the end of September.", "2026-10-01T08:00:00")
            new_m = await _message(conn, "From now on my Kvällsskift runs 15:00-23:00.", "2026-10-21T08:00:00")
            old = await facts.remember(
                conn, agent_id="demo", key="shift_pattern", value="Dagskift runs 07:00-16:00", origin="saw", source_ref=old_m,
                recorded_at=at("2026-10-02T10:00:00"),
            )
            with pytest.raises(FactError, match="already active"):
                await facts.remember(conn, agent_id="demo", key="shift_pattern", value="x y", origin="did", recorded_at=at("2026-10-03T10:00:00"))
            new = await facts.supersede(
                conn, agent_id="demo", fact_id=old.fact_id, value="Kvällsskift runs 15:00-23:00", origin="saw", source_ref=new_m,
                recorded_at=at("2026-10-21T10:00:00"),
            )
            assert new.status == "active" and new.supersedes_id == old.fact_id
            with pytest.raises(FactError, match="is superseded, not active"):
                await facts.supersede(conn, agent_id="demo", fact_id=old.fact_id, value="z", origin="did", recorded_at=at("2026-10-22T10:00:00"))
        found = await recall.provenance_facts(wake_ctx(config, st, at("2026-11-01T12:00:00")))
    assert marked.plain(found.text).splitlines()[1:] == [
        "- ⟦saw, 21 Oct 2026⟧ shift_pattern: Kvällsskift runs 15:00-23:00",
        "  ⟦SUPERSEDED saw, recorded 2026-10-02, superseded 2026-10-21⟧ shift_pattern: Dagskift runs 07:00-16:00",
    ]
    assert found.rows == 1


async def test_an_unattested_value_does_not_unseat_the_active_fact(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn, conn.transaction():
            m = await _message(conn, "The storage box in the basement is number 14.")
            rumour = await _message(conn, "Did you hear anything about the basement?")
            old = await facts.remember(
                conn, agent_id="demo", key="storage_box", value="basement box number 14", origin="saw", source_ref=m,
                recorded_at=at("2026-11-01T10:00:00"),
            )
            new = await facts.supersede(
                conn, agent_id="demo", fact_id=old.fact_id, value="attic box number 9", origin="saw", source_ref=rumour,
                recorded_at=at("2026-11-02T10:00:00"),
            )
            assert new.status == "unverified" and new.supersedes_id == old.fact_id
            rows, total = await facts.listing(conn, "demo", include_all=True, limit=10)
        found = await recall.provenance_facts(wake_ctx(config, st, at("2026-11-03T12:00:00")))
    assert {r.fact_id: r.status for r in rows} == {old.fact_id: "active", new.fact_id: "unverified"} and total == 2
    assert "basement box number 14" in found.text and "attic" not in found.text and "SUPERSEDED" not in found.text
    assert "(1 unverified fact held back" in found.text


async def test_a_store_error_is_could_not_check_not_no_facts(store_config: Callable[..., Config]) -> None:
    from wake.arrival import engine as arrival
    from wake.arrival import sources

    config = store_config()
    async with sessions.ready_stores(config) as st:
        ctx = wake_ctx(config, st, at("2026-11-01T12:00:00"))
        await st.pg.close()  # the real pool, closed: every source over PostgreSQL must now fail typed
        blocks = [
            await arrival.run_source(sources.BUILTIN[name], ctx, 2.0)
            for name in ("provenance_facts", "settled_facts", "living_summaries", "daybook")
        ]
    for block in blocks:
        assert block.retrieval == "failed" and block.result == "unknown", block
        assert block.text.startswith("could not check: "), block.text


async def test_message_and_wake_anchors_are_verified_on_read(store_config: Callable[..., Config]) -> None:
    config = store_config()
    gone = uuid.uuid4()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            m = await _message(conn, "the canary wrote probe.txt")
            await facts.remember(
                conn, agent_id="demo", key="canary", value="wrote probe.txt", origin="did", recorded_at=at("2026-11-01T10:00:00"),
                anchors=[{"type": "message", "ref": str(m).upper()}, {"type": "wake", "ref": str(gone)}, {"type": "url", "ref": "https://x.org"}],
            )
            bad_type = (r"anchors\[0\] \(hunch 'x'\): type must be one of file, dir, import, symbol, env, package, signature, value, "
                    r"absent, message, wake, url")
            with pytest.raises(FactError, match=bad_type):
                await facts.remember(conn, agent_id="demo", key="k2", value="v", origin="did", recorded_at=at("2026-11-01T10:00:00"),
                                     anchors=[{"type": "hunch", "ref": "x"}])
        found = await recall.provenance_facts(wake_ctx(config, st, at("2026-11-02T10:00:00")))
    assert marked.plain(found.text).splitlines()[1] == (
        f"- ⟦did, 1 Nov 2026⟧ canary: wrote probe.txt ⟦message {str(m).upper()}, found⟧ ⟦wake {gone}, MISSING⟧ ⟦url https://x.org⟧"
    )


async def test_retired_facts_leave_the_arrival(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            kept = await facts.remember(conn, agent_id="demo", key="kept", value="still true", origin="did", recorded_at=at("2026-11-01T10:00:00"))
            ids = {
                status: (await facts.remember(conn, agent_id="demo", key=f"k_{status}", value=f"was {status}", origin="did",
                                              recorded_at=at("2026-11-01T11:00:00"))).fact_id
                for status in facts.RETIRED_STATUSES
            }
            for status, fact_id in ids.items():
                await facts.retire(conn, agent_id="demo", fact_id=fact_id, status=status)
            with pytest.raises(FactError, match="no active fact"):
                await facts.retire(conn, agent_id="demo", fact_id=ids["refuted"], status="expired")
            with pytest.raises(FactError, match="status must be one of overridden, expired, refuted"):
                await facts.retire(conn, agent_id="demo", fact_id=kept.fact_id, status="superseded")
            listed, _ = await facts.listing(conn, "demo", include_all=True, limit=10)
        found = await recall.provenance_facts(wake_ctx(config, st, at("2026-11-02T10:00:00")))
    assert {r.fact_key: r.status for r in listed} == {
        "kept": "active", "k_overridden": "overridden", "k_expired": "expired", "k_refuted": "refuted",
    }
    assert found.rows == 1 and "was " not in found.text and "kept: still true" in marked.plain(found.text)
