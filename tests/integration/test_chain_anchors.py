"""Anchored chain heads over real PostgreSQL and Redis and a real RFC 3161 authority on loopback
(tests/support/tsa.py): the daemon's anchoring side task, and tokens that do not verify."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from ledgers import chain_anchors, introspection
from tests.support import tsa, wakes
from wake import stores
from wake.config import Config
from wake.config.anchor import AnchorConfig
from wake.daemon import anchoring
from wake.run import session
from wake.stores import prepared
from wake.witness import anchor

AGENTS = """
[agents.demo]
[agents.demo.tiers.whisper]
every = "15m"
binds = ["wake.whisper"]
"""


@pytest.fixture
async def anchored_stores(store_config: Callable[..., Config], tmp_path: Path) -> AsyncIterator[tuple[stores.Stores, tsa.Served]]:
    authority = tsa.make(tmp_path)
    with tsa.serving(authority) as served:
        config = store_config(f'[anchor]\ntsa_url = "{served.url}"\nca_file = "{authority.ca}"\ndaemon = true\n', agents=AGENTS)
        async with stores.connected(config) as st:
            await prepared.prepare_schema(st)
            for _ in range(2):
                await wakes.run(config, st, session.build_registry(config), agent_id="demo", tier="whisper")
            yield st, served


async def test_the_daemon_anchors_once_then_waits_its_interval(anchored_stores: tuple[stores.Stores, tsa.Served]) -> None:
    st, served = anchored_stores
    task_of = anchoring.companion(st.config)
    assert task_of is not None and task_of.name == "anchoring"
    assert anchoring.companion(st.config.model_copy(update={"anchor": AnchorConfig()})) is None  # off unless [anchor] daemon = true
    stop, rounds = asyncio.Event(), asyncio.Event()
    seen: list[list[anchor.Anchored]] = []

    def told(done: list[anchor.Anchored]) -> None:
        seen.append(done)
        rounds.set()

    runner = asyncio.create_task(anchoring.run(st.config, lambda: st, stop, anchored=told))
    await asyncio.wait_for(rounds.wait(), 120)
    async with st.pg_conn() as conn:
        left = await anchoring.due_in_s(conn, st.config.anchor.interval_s, dt.datetime.now(dt.UTC))
        stored = await chain_anchors.of_agent(conn, "demo")
    stop.set()
    await asyncio.wait_for(runner, 30)
    assert [(a.agent_id, a.chain_seq) for a in seen[0]] == [("demo", 2)] and len(seen) == 1
    assert [a.chain_seq for a in stored] == [2] and served.requests == 1
    assert 86_000 < left <= 86_400  # the next is a day away: a restarted daemon does not ask again


async def test_a_token_that_is_not_one_or_over_another_head_is_a_mismatch(anchored_stores: tuple[stores.Stores, tsa.Served]) -> None:
    st, _ = anchored_stores
    trusted = anchor.roots(Path(st.config.anchor.ca_file or ""))
    async with st.pg_conn() as conn:
        await anchor.anchor_heads(conn, st.config.anchor.tsa_url or "", trusted, dt.datetime.now(dt.UTC), timeout_s=30)
        good = await anchor.check_agent(conn, "demo", trusted)
        rows = await introspection.chain_rows(conn, "demo")
        [stored] = await chain_anchors.of_agent(conn, "demo")
    assert good.mismatch is None and good.verified == 1
    garbage = dataclasses.replace(stored, token=b"\x30\x03\x02\x01\x00")
    check = anchor.check("demo", rows, [garbage], trusted)
    assert check.mismatch is not None and check.mismatch.last_good == 0 and check.mismatch.first_suspect == rows[0]
    moved = dataclasses.replace(stored, chain_seq=1)  # the token of link 2 offered for link 1
    assert anchor.check("demo", rows, [moved], trusted).mismatch is not None
    other = anchor.check("someone-else", rows, [stored], trusted)  # the message names the agent
    assert other.mismatch is not None
    assert anchor.check("demo", rows, [stored], None).verified == 0  # no ca_file: counted, not verified
