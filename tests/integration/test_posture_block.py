"""The posture and context-audit arrival blocks over real PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from ledgers import commitments, contact, context_events
from ledgers.vocab import Result, Retrieval
from tests.support import sessions
from tests.support.ledger_ctx import wake_ctx
from untrusted import spotlight
from wake import stores
from wake.arrival import engine, sources
from wake.config import Config

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
MARKS = spotlight.for_agent("demo")


async def _block(config: Config, name: str, now: dt.datetime = NOW) -> engine.Block:
    async with stores.connected(config) as st:
        return await engine.run_source(sources.BUILTIN[name], wake_ctx(config, st, now), 5.0)


async def test_no_human_contact_is_empty_not_cold(store_config: Callable[..., Config]) -> None:
    config = store_config()
    await sessions.prepare(config)
    block = await _block(config, "posture")
    assert block.retrieval == Retrieval.ok and block.result == Result.empty
    assert "No human has written" in block.text and "cold" not in block.text


async def test_posture_follows_the_last_human_message_and_cold_lists_commitments(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            await contact.record(conn, agent_id="demo", author="ana", channel="chat", body="hi", received_at=NOW - dt.timedelta(seconds=119))
            await commitments.add(conn, agent_id="demo", title="send the lease report", due_on=None, created_at=NOW)
    present = await _block(config, "posture")
    assert present.result == Result.present and present.text.startswith("Posture: present")
    warm = await _block(config, "posture", NOW + dt.timedelta(seconds=2))  # 121 s: over the edge
    assert warm.text.startswith("Posture: warm")
    cold = await _block(config, "posture", NOW + dt.timedelta(hours=7))
    assert cold.text.startswith("Posture: cold") and "full recap" in cold.text and f"- {MARKS.span('send the lease report')}" in cold.text
    assert "Open commitments (1 of 1, newest first):" in cold.text


async def test_the_agent_can_turn_posture_off_and_the_audit_block_carries_its_pattern(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            await context_events.record(conn, agent_id="demo", kind="config_set", reason="quiet", at=NOW,
                                        detail={"key": "frame_of_mind.posture", "value": False})
            for _ in range(3):
                await context_events.record(conn, agent_id="demo", kind="declined", reason="mid-thought", at=NOW, pressure_before=0.9)
    off = await _block(config, "posture")
    assert off.retrieval == Retrieval.disabled and "posture is off" in off.text
    audit = await _block(config, "context_audit", NOW + dt.timedelta(hours=1))
    assert audit.result == Result.present
    assert f"You deferred or declined compaction 3 times in the last 7 days, because: {MARKS.span('mid-thought')} (3×)." in audit.text
    later = await _block(config, "context_audit", NOW + dt.timedelta(days=8))
    assert later.result == Result.empty
