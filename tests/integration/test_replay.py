"""`wake replay` over real PostgreSQL and Redis and the scripted OpenAI-compatible server: the
first request rebuilt byte for byte from the ledger, calls answered from the recording, a
mutating tool never run, nothing written to the agent's ledgers, and the report."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support import agents as agent_configs
from tests.support import replay_tools, wakes
from tests.support.openai_server import ScriptedServer, completion
from wake import stores
from wake.cli.main import cli
from wake.config import Config
from wake.replay import recording
from wake.replay.run import Candidate, Outcome, replay
from wake.run import cycle, session
from wake.think.client import Client

# Rows a replay must never touch: every table of the schema but its own.
COUNT_ALL = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind = 'r' AND n.nspname = 'public' AND c.relname NOT LIKE 'wake_replay%' ORDER BY c.relname
"""


@pytest.fixture
def config(store_config: Callable[..., Config], server: ScriptedServer) -> Config:
    routes = agent_configs.scripted(server.url) + agent_configs.scripted(server.url, name="other", model="scripted-2")
    agents = agent_configs.toml(tiers={"surface": agent_configs.SURFACE}, extra=[agent_configs.PERSONA])
    return store_config(agent_configs.tools("replay_tools") + routes, agents=agents)


async def _record(config: Config) -> cycle.WakeOutcome:
    return await wakes.once(config, tier="surface")


async def _counts(config: Config) -> dict[str, int]:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        names = [r["relname"] for r in await conn.fetch(COUNT_ALL)]
        counts = {n: int(await conn.fetchval(f'SELECT count(*) FROM "{n}"')) for n in names}
        counts["redis keys"] = int(await st.redis.dbsize())
        return counts


async def _replay(config: Config, wake_id: Any, candidate: Candidate | None = None) -> Outcome:
    async with stores.connected(config) as st:
        async with st.pg_conn() as conn:
            recorded = await recording.read(conn, wake_id)
        client = Client()
        try:
            c = candidate or Candidate()
            return await replay(st, config, session.build_registry(c.config or config), recorded, c, client)
        finally:
            await client.aclose()


def _script(target: Path) -> list[Any]:
    return [
        completion("Looking first.", [("peek", {"what": "queue"}), ("file_write", {"path": str(target), "text": "all calm"})]),
        completion("Peeked, wrote the note."),
    ]


async def test_a_replay_with_the_same_route_sends_the_recorded_first_request_and_makes_the_same_decisions(
    config: Config, server: ScriptedServer, tmp_path: Path,
) -> None:
    target = tmp_path / "note.txt"
    server.push(*_script(target))
    o = await _record(config)
    assert o.status == "completed", o.error
    assert target.read_text() == "all calm" and [n for n, _ in replay_tools.RAN] == ["peek", "file_write"]
    original_first = server.requests[0].raw
    target.unlink()
    replay_tools.RAN.clear()
    before = await _counts(config)

    server.push(*_script(target))
    out = await _replay(config, o.wake_id)

    assert server.requests[2].raw == original_first  # byte for byte: the arrival, the tools, the route's parameters
    assert out.record.request_sha256 == hashlib.sha256(original_first).hexdigest()
    assert out.record.request_matches is True
    assert out.record.report["same_decisions"] is True, out.record.report["first_divergence"]
    assert out.record.out_of_recording == 0
    assert replay_tools.RAN == [] and not target.exists()  # answered from the recording: nothing ran
    # the recorded answers were sent back, as the original wake sent them
    assert server.requests[3].json["messages"][2:] == server.requests[1].json["messages"][2:]
    assert await _counts(config) == before  # no row of the agent's ledgers, memory or outbox; no Redis key

    async with stores.connected(config) as st, st.pg_conn() as conn:
        calls = await conn.fetch("SELECT tool, answered_from, mutates FROM wake_replay_tool_calls WHERE replay_id = $1 ORDER BY seq",
                                 out.record.replay_id)
    assert [(r["tool"], r["answered_from"], r["mutates"]) for r in calls] == [("peek", "recorded", False), ("file_write", "recorded", True)]


async def test_a_call_whose_arguments_the_transcript_redacted_is_still_answered_from_the_recording(
    config: Config, server: ScriptedServer, tmp_path: Path,
) -> None:
    # The transcript keeps a call's arguments redacted under the log rules (an `sk-` key here), so
    # the replay must compare the model's new call in that stored form, not its raw text, or the
    # same call reads as out of the recording (CI saw it once on llama.cpp).
    target = tmp_path / "note.txt"
    script = [completion(None, [("peek", {"what": "key sk-abcdefgh12345678 then Bearer tok.en"})]), completion("Peeked.")]
    server.push(*script)
    o = await _record(config)
    assert o.status == "completed", o.error
    async with stores.connected(config) as st, st.pg_conn() as conn:
        recorded = await recording.read(conn, o.wake_id)
    assert "sk-abcdefgh" not in recorded.calls[0].arguments and "***" in recorded.calls[0].arguments  # stored redacted
    replay_tools.RAN.clear()
    server.push(*script)
    out = await _replay(config, o.wake_id)
    assert out.record.out_of_recording == 0 and replay_tools.RAN == [] and not target.exists()
    assert out.record.report["same_decisions"] is True, out.record.report["first_divergence"]
    server.push(completion(None, [("peek", {"what": "key sk-zzzzzzzz99999999 then Bearer tok.en"})]), completion("Peeked."))
    out = await _replay(config, o.wake_id)  # another key redacts the same: equal as stored, so answered as recorded
    assert out.record.out_of_recording == 0 and replay_tools.RAN == []
    server.push(completion(None, [("peek", {"what": "key sk-abcdefgh12345678 then Bearer tok.en, twice"})]), completion("Peeked."))
    out = await _replay(config, o.wake_id)  # different outside the redaction: out of the recording
    assert out.record.out_of_recording == 1


async def test_a_call_not_in_the_recording_never_runs_and_is_counted_and_a_mutating_one_not_even_live(
    config: Config, server: ScriptedServer, tmp_path: Path,
) -> None:
    server.push(*_script(tmp_path / "note.txt"))
    o = await _record(config)
    assert o.status == "completed", o.error
    replay_tools.RAN.clear()
    before = await _counts(config)
    elsewhere = tmp_path / "elsewhere.txt"
    server.push(
        completion(None, [("peek", {"what": "inbox"}), ("file_write", {"path": str(elsewhere), "text": "other"})]),
        completion("Did other things."),
    )
    out = await _replay(config, o.wake_id, Candidate(live_readonly=True))
    assert not elsewhere.exists()  # the mutating call never ran, --live-readonly or not
    assert replay_tools.RAN == [("peek", {"what": "inbox"})]  # the read-only one ran live, as asked
    assert (out.record.out_of_recording, out.record.live_calls) == (1, 1)
    div = out.record.report["first_divergence"]
    assert (div["turn"], div["kind"], div["call"]) == (1, "call", 0)
    assert any('"inbox"' in line for line in div["arguments_diff"])
    assert await _counts(config) == before

    replay_tools.RAN.clear()
    server.push(completion(None, [("peek", {"what": "inbox"})]), completion("Done."))
    out = await _replay(config, o.wake_id)  # without --live-readonly: not run, counted
    assert replay_tools.RAN == [] and out.record.out_of_recording == 1 and out.record.live_calls == 0
    answer = server.requests[-1].json["messages"][-1]
    assert answer["role"] == "tool" and "not in the recording" in answer["content"]


async def test_changed_instructions_are_sent_and_the_report_names_the_first_divergent_turn(
    config: Config, server: ScriptedServer, tmp_path: Path,
) -> None:
    server.push(*_script(tmp_path / "note.txt"))
    o = await _record(config)
    assert o.status == "completed", o.error
    server.push(completion("Looking first.", [("peek", {"what": "queue"})]), completion("Only peeked this time."))
    new = Candidate(instructions="Never write files.", instructions_path="new.md", route="other")
    out = await _replay(config, o.wake_id, new)
    sent = server.requests[-2].json
    assert sent["model"] == "scripted-2" and "## instructions\nNever write files." in sent["messages"][0]["content"]
    assert out.record.request_matches is False
    div = out.record.report["first_divergence"]
    assert (div["turn"], div["kind"], div["call"]) == (1, "call", 1)
    assert div["recorded"]["tool"] == "file_write" and div["replay"] is None
    assert out.record.report["transcript_diff"]


def test_the_cli_replays_by_prefix_and_shows_and_lists_the_stored_replay(config: Config, server: ScriptedServer, tmp_path: Path) -> None:
    server.push(*_script(tmp_path / "note.txt"))
    o = asyncio.run(_record(config))
    server.push(*_script(tmp_path / "note.txt"))
    runner = CliRunner()
    got = runner.invoke(cli, ["--config", str(config.path), "replay", str(o.wake_id)[:8], "--json"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.stdout)
    assert data["report"]["same_decisions"] is True and data["wake_id"] == str(o.wake_id)
    shown = runner.invoke(cli, ["--config", str(config.path), "replay", "show", data["replay_id"][:8]])
    assert shown.exit_code == 0, shown.output
    assert "decisions: the same as recorded" in shown.output and "out-of-recording calls (never run): 0" in shown.output
    listed = runner.invoke(cli, ["--config", str(config.path), "replay", "list", "--json"])
    assert [r["replay_id"] for r in json.loads(listed.stdout)] == [data["replay_id"]]
    missing = runner.invoke(cli, ["--config", str(config.path), "replay", "ffffffff"])
    assert missing.exit_code == 1 and "no wake matches" in missing.output
    bad = runner.invoke(cli, ["--config", str(config.path), "replay", str(o.wake_id), "--route", "nope"])
    assert bad.exit_code == 78 and "no route 'nope'" in bad.output
    unreadable = runner.invoke(cli, ["--config", str(config.path), "replay", str(o.wake_id), "--instructions", str(tmp_path / "none.md")])
    assert unreadable.exit_code == 2 and "cannot read" in unreadable.output and "Traceback" not in unreadable.output
    broken = tmp_path / "broken.toml"
    broken.write_text("[agents.demo\n")
    refused = runner.invoke(cli, ["--config", str(config.path), "replay", str(o.wake_id), "--config", str(broken)])
    assert refused.exit_code == 78 and "Traceback" not in refused.output
    async def replays() -> int:
        async with stores.connected(config) as st, st.pg_conn() as conn:
            return int(await conn.fetchval("SELECT count(*) FROM wake_replays"))
    assert asyncio.run(replays()) == 1  # the refused ones stored nothing
