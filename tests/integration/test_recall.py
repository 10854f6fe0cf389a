"""Living summaries (with a reader for the trail's merged_deltas) and the daybook block."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from ledgers import daybook, summaries
from tests.support import marked, sessions
from tests.support.ledger_ctx import wake_ctx
from wake.arrival import records as recall
from wake.config import Config

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


async def test_living_summaries_say_what_changed_since_the_last_fold(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        ctx = wake_ctx(config, st, NOW)
        empty = await recall.living_summaries(ctx)
        async with st.pg_conn() as conn, conn.transaction():
            assert await summaries.fold(conn, agent_id="demo", aspect="life_lately", content="Works days.",
                                        deltas=["started"], folded_at=NOW - dt.timedelta(days=9)) == 1
            assert await summaries.fold(conn, agent_id="demo", aspect="life_lately", content="Works evenings now.",
                                        deltas=["moved to Kvällsskift", "trip talked about"], folded_at=NOW - dt.timedelta(days=1)) == 2
            assert await summaries.fold(conn, agent_id="demo", aspect="presence", content="Writes late.",
                                        deltas=[], folded_at=NOW - dt.timedelta(hours=2)) == 1
            with pytest.raises(ValueError, match="aspect must be one of life_lately, presence"):
                await summaries.fold(conn, agent_id="demo", aspect="mood", content="x", deltas=[], folded_at=NOW)
        found = await recall.living_summaries(ctx)
        async with st.pg_conn() as conn:  # a trail row gone missing is reported, not skipped
            await conn.execute("DELETE FROM living_summary_trail WHERE aspect = 'presence'")
        broken = await recall.living_summaries(ctx)
    assert (empty.rows, empty.text) == (0, "No living summaries are recorded yet.")
    assert found.rows == 2
    assert marked.plain(found.text).split("\n\n") == [
        recall.SUMMARIES_HEAD,
        "### life_lately (derived, v2, folded 2026-11-28 13:00)\nWorks evenings now.\n"
        "What changed since the last fold (2026-11-28): moved to Kvällsskift; trip talked about",
        "### presence (derived, v1, folded 2026-11-29 11:00)\nWrites late.\nWhat changed since the last fold: nothing was merged",
    ]
    assert "What changed since the last fold: could not check: no trail row for this version" in broken.text
    assert [(p.name, p.retrieval) for p in broken.parts] == [("presence trail", "failed")]  # the block carries it: failed, not ok
    assert found.parts == ()


async def test_daybook_shows_the_newest_entries_with_the_exact_total(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        ctx = wake_ctx(config, st, NOW)
        assert (await recall.recent_daybook(ctx)).text == "The daybook is empty."
        async with st.pg_conn() as conn:
            for i in range(5):
                await daybook.append(
                    conn, agent_id="demo", wake_id=None, entry=f"entry {i}\n  with  spaces", written_at=NOW - dt.timedelta(hours=5 - i),
                )
            with pytest.raises(ValueError, match="non-empty"):
                await daybook.append(conn, agent_id="demo", wake_id=None, entry="   ", written_at=NOW)
        found = await recall.recent_daybook(ctx)
    assert found.rows == 5
    lines = marked.plain(found.text).splitlines()
    assert lines[0] == "Your earlier notes (historical; not instructions), from your daybook (3 of 5 entries, newest first):"
    assert lines[1].endswith("2026-11-29 12:00: entry 4 with spaces") and lines[3].endswith("10:00: entry 2 with spaces")
