"""`wake mcp serve` driven by the official `mcp` SDK's client, over stdio and streamable HTTP,
against real PostgreSQL and Redis and a wake whose model (the scripted server) made two calls."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.support import marked, sessions, wakes
from tests.support.openai_server import ScriptedServer, completion
from wake.cli import mcp_serve
from wake.config import Config
from wake.run import cycle, session

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0


@pytest.fixture
def config(store_config: Callable[..., Config], server: ScriptedServer) -> Config:
    extra = f'[tools]\nmodules = ["tests.support.think_tools"]\n[models.scripted]\nbase_url = "{server.url}"\nmodel = "scripted-1"\n'
    agents = "".join(
        f'[agents.{a}]\npersona_files = ["persona.md"]\n[agents.{a}.tiers.surface]\nbinds = ["wake.whisper", "wake.surface"]\nmodel = "scripted"\n'
        for a in ("demo", "other")
    )
    return store_config(extra, agents=agents)


async def _wake(config: Config, agent: str) -> cycle.WakeOutcome:
    async with sessions.ready_stores(config) as st:
        o = await wakes.run(config, st, session.build_registry(config), agent_id=agent, tier="surface")
    assert o.status == "completed", o.error
    return o


@pytest.fixture
async def two_calls(config: Config, server: ScriptedServer) -> tuple[str, str]:
    server.push(
        completion("Two things.", [("local_time", {}), ("note_write", {"text": "fed the cat"})]),
        completion("Daybook: fed the cat at the right time."),
    )
    mine = await _wake(config, "demo")
    theirs = await _wake(config, "other")  # the script is empty: it answers without calling a tool
    return str(mine.wake_id), str(theirs.wake_id)


def _env(tmp_path: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "WAKE_STATE_DIR": str(tmp_path / "state-mcp"), "WAKE_LOG_FORMAT": "json", "PATH": os.environ["PATH"]}


def _structured(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def _counts(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        tables = [r["table_name"] for r in await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")]
        return {t: int(await conn.fetchval(f'SELECT count(*) FROM "{t}"')) for t in tables}
    finally:
        await conn.close()


async def test_a_stdio_client_reads_a_wakes_arrival_and_transcript_scoped_to_one_agent(
    config: Config, two_calls: tuple[str, str], tmp_path: Path, pg_dsn: str,
) -> None:
    mine, theirs = two_calls
    before = await _counts(pg_dsn)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "wake", "--config", str(config.path), "mcp", "serve", "--agent", "demo"], env=_env(tmp_path),
    )
    async with asyncio.timeout(WAIT_S), Client(params, mode="legacy") as client:
        tools = (await client.list_tools()).tools
        assert sorted(t.name for t in tools) == [
            "binding_diff", "findings", "open_commitments", "recent_wakes", "settled_state", "wake", "wake_arrival", "wake_transcript",
        ]
        assert all(t.annotations is not None and t.annotations.read_only_hint is True for t in tools)

        said = _structured(await client.call_tool("wake_transcript", {"wake_id": mine[:8]}))
        assert [(c["tool"], json.loads(marked.plain(c["arguments"])), c["outcome"]) for c in said["calls"]] == [
            ("local_time", {}, "ok"), ("note_write", {"text": "fed the cat"}, "ok"),
        ]
        assert json.loads(marked.plain(said["calls"][1]["answer"])) == {"written": "fed the cat"}
        assert [m["role"] for m in said["messages"]] == ["system", "user", "assistant", "tool", "tool", "assistant"]

        arrived = _structured(await client.call_tool("wake_arrival", {"wake_id": mine}))
        names = [b["name"] for b in arrived["blocks"]]
        assert "identity" in names and all(b["text"] for b in arrived["blocks"] if b["name"] == "identity")

        text = (await client.read_resource(f"wake://demo/wakes/{mine}/transcript")).contents[0]
        assert 'call call_1: note_write {"text": "fed the cat"}  -> ok (answer 4)' in marked.plain(getattr(text, "text", ""))
        page = (await client.read_resource(f"wake://demo/wakes/{mine}/arrival")).contents[0]
        assert "## identity\n" in getattr(page, "text", "")

        recent = _structured(await client.call_tool("recent_wakes", {}))
        assert [r["wake_id"] for r in recent["wakes"]] == [mine] and recent["count"] == 1  # only this session's agent
        none = await client.call_tool("recent_wakes", {"tier": "full"})  # no full wake: an answer with content all the same
        assert _structured(none)["count"] == 0 and none.content and '"count": 0' in none.content[0].text  # type: ignore[union-attr]
        unknown = await client.call_tool("recent_wakes", {"tier": "nonsense"})
        assert unknown.is_error and "nonsense" in unknown.content[0].text  # type: ignore[union-attr]
        refused = await client.call_tool("wake_transcript", {"wake_id": theirs})
        assert refused.is_error and "agent 'demo' has no wake" in refused.content[0].text  # type: ignore[union-attr]
        diff = _structured(await client.call_tool("binding_diff", {}))
        assert diff["wake_id"] == mine and "note_write" in diff["tools_bound"] and diff["diff"]["agent"]["first"] is True
        assert _structured(await client.call_tool("open_commitments", {}))["total"] == 0
        assert _structured(await client.call_tool("findings", {"state": "all"}))["state"] == "all"
        assert _structured(await client.call_tool("settled_state", {}))["agent"] == "demo"
        bad = await client.call_tool("findings", {"state": "nonsense"})
        assert bad.is_error and "state must be one of open" in bad.content[0].text  # type: ignore[union-attr]
    assert await _counts(pg_dsn) == before  # it wrote nothing


async def test_a_streamable_http_client_reads_the_same(config: Config, two_calls: tuple[str, str], tmp_path: Path) -> None:
    mine, _ = two_calls
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "wake", "--config", str(config.path), "mcp", "serve", "--agent", "demo", "--listen", "127.0.0.1:0",
        env=_env(tmp_path), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    try:
        url = await asyncio.wait_for(_listening(proc), WAIT_S)
        async with asyncio.timeout(WAIT_S), Client(url) as client:
            said = _structured(await client.call_tool("wake_transcript", {"wake_id": mine}))
            assert [c["tool"] for c in said["calls"]] == ["local_time", "note_write"]
            arrived = _structured(await client.call_tool("wake_arrival", {"wake_id": mine}))
            assert arrived["wake_id"] == mine and arrived["blocks"]
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), WAIT_S)


async def _listening(proc: asyncio.subprocess.Process) -> str:
    assert proc.stderr is not None
    seen = []
    while line := await proc.stderr.readline():
        seen.append(line.decode(errors="replace"))
        if line.startswith(b"{") and (event := json.loads(line)).get("event") == "mcp.listening":
            return str(event["url"])
    raise AssertionError("the server exited before it listened:\n" + "".join(seen[-20:]))


async def test_every_read_runs_in_a_read_only_transaction(config: Config) -> None:
    async with sessions.ready_stores(config, neo4j=False) as st:
        ledgers = mcp_serve.Ledgers(st, "demo")
        async with ledgers._read() as conn:
            with pytest.raises(asyncpg.exceptions.ReadOnlySQLTransactionError):
                await conn.execute("INSERT INTO settled_state (agent_id, subject, state, state_on, settled_at)"
                                   " VALUES ('demo', 's', 'x', now(), now())")


async def test_a_bad_listen_address_is_one_line_and_exit_2(config: Config, tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "wake", "--config", str(config.path), "mcp", "serve", "--agent", "demo", "--listen", "nowhere",
        env=_env(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode == 2 and "expected HOST:PORT such as 127.0.0.1:9464" in err.decode()




async def test_a_prefix_is_looked_up_among_the_served_agents_wakes_only(config: Config) -> None:
    """Issue 40 (6): a prefix shared with another agent's wake names this agent's one; another
    agent's wake, even by its full id, is not there."""
    mine, theirs = "abcd1234-0000-4000-8000-000000000001", "abcd1234-0000-4000-8000-000000000002"
    async with sessions.ready_stores(config, neo4j=False) as st:
        async with st.pg_conn() as conn:
            for wake_id, agent in ((mine, "demo"), (theirs, "other")):
                await conn.execute(
                    "INSERT INTO wake_introspection_ledger (wake_id, agent_id, tier, trigger, status, finished_at, host, pid, version, config_hash)"
                    " VALUES ($1, $2, 'surface', 'manual', 'failed', now(), 'h', 1, 'v', 'c')", uuid.UUID(wake_id), agent)
        ledgers = mcp_serve.Ledgers(st, "demo")
        assert (await ledgers.wake("abcd1234"))["wake_id"] == mine
        from mcp.server.mcpserver.exceptions import ToolError

        with pytest.raises(ToolError, match="has no wake"):
            await ledgers.wake(theirs)
        assert (await mcp_serve.Ledgers(st, "other").wake("abcd1234"))["wake_id"] == theirs
