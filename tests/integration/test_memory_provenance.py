"""Each memory commit records where its text came from, and the `memory` block shows it: whole
wakes over real PostgreSQL, Redis and git, the scripted model server on loopback. A page a tool
fetched and the model copied into memory is a tool result's; a human's message copied is the
human's; the model's own words are its own; an operator's revert is the operator's."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from ledgers import contact
from ledgers import memory_ledger as ledger
from memory import provenance
from memory.repo import MemoryRepo
from tests.support import agents as agent_configs
from tests.support import marked, sessions, wakes
from tests.support.memory_git import doc, requires_git
from tests.support.openai_server import ScriptedServer, completion
from tests.support.provenance_tools import PAGE
from wake import stores
from wake.config import Config
from wake.run import cycle

pytestmark = requires_git
T0 = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)
HUMAN = "Please keep the greenhouse door shut after six in the evening, the cat gets in otherwise."


@pytest.fixture
def config(store_config: Callable[..., Config], server: ScriptedServer) -> Config:
    agents = agent_configs.toml(tiers={"full": 'binds = ["wake"]\nmodel = "scripted"'}, timezone="UTC", extra=[agent_configs.PERSONA])
    return store_config(agent_configs.tools("provenance_tools") + agent_configs.scripted(server.url), agents=agents)


async def _wake(config: Config, **kw: Any) -> cycle.WakeOutcome:
    async with sessions.ready_stores(config, neo4j=False) as st:
        return await wakes.run(config, st, agent_id="demo", tier="full", **kw)


def _repo(config: Config) -> MemoryRepo:
    return MemoryRepo.open(config.memory_path("demo"), config.memory_config("demo"), at=T0)


def _sources(repo: MemoryRepo) -> dict[str, dict[str, str]]:
    """path -> the trailers of the newest commit that touched it (one file per commit here)."""
    found: dict[str, dict[str, str]] = {}
    for entry in repo.log(limit=50):
        for path in entry.paths:
            found.setdefault(path, entry.trailers)
    return found


async def test_each_commit_records_where_its_text_came_from_and_the_next_memory_block_shows_it(
    config: Config, server: ScriptedServer,
) -> None:
    async with sessions.ready_stores(config, neo4j=False) as st:
        async with st.pg_conn() as conn:
            message_id = await contact.record(conn, agent_id="demo", author="ana", channel="cli", body=HUMAN, received_at=T0)
    copied_page = doc("what the gardening page said", f"From the page: {PAGE}\n")
    own = doc("my own plan", "Sow the second row of beans on Friday, after checking the soil is dry enough.\n")
    server.push(
        completion(None, [("fetch_page", {"url": "https://garden.example/tomatoes"})]),
        completion(None, [("memory", {"command": "write", "path": "reference/page.md", "content": copied_page})]),
        completion(None, [("memory", {"command": "append", "path": "journal/2026-11-30.md", "text": f"Ana asked: {HUMAN}"})]),
        completion(None, [("memory", {"command": "write", "path": "reference/plan.md", "content": own})]),
        completion("Noted the page, Ana's request and my plan."),
    )
    first = await _wake(config)
    assert first.status == "completed", first.error
    repo = _repo(config)
    sources = _sources(repo)
    assert {k: v for k, v in sources["reference/page.md"].items() if k.startswith("Source")} == {"Source": "tool_result", "Source-Ref": "fetch_page"}
    assert sources["journal/2026-11-30.md"]["Source"] == "human"
    assert sources["journal/2026-11-30.md"]["Source-Ref"] == f"message {message_id}"
    assert sources["reference/plan.md"]["Source"] == "model" and "Source-Ref" not in sources["reference/plan.md"]
    assert sources["system/state.md"]["Source"] == "operator"  # the bootstrap layout

    async with stores.connected(config, neo4j=False) as st, st.pg_conn() as conn:
        reverted, _ = await ledger.revert_commit(conn, repo, "demo", repo.log("reference/plan.md", limit=1)[0].commit, by="ops", at=T0)
    assert _sources(repo)["reference/plan.md"]["Source"] == "operator"

    server.push(completion("Nothing new."))
    second = await _wake(config)
    block = marked.plain(next(b.text for b in second.blocks if b.name == "memory"))
    changes = block.split("recent changes, newest first, and where their text came from:\n", 1)[1].splitlines()
    assert changes[:4] == [
        f"- reference/plan.md (revert, operator): {provenance.describe(provenance.OPERATOR_WRITE)}",
        f"- reference/plan.md (write, wake {str(first.wake_id)[:8]}): the model's own text",
        f"- journal/2026-11-30.md (append, wake {str(first.wake_id)[:8]}): a human's message (message {message_id})",
        f"- reference/page.md (write, wake {str(first.wake_id)[:8]}): a tool result (fetch_page)",
    ]
    assert reverted.result.op == "revert"
