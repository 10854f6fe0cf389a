"""The transcript of a wake over real PostgreSQL and Redis and the scripted OpenAI-compatible
server: every message the model saw and every call it made, content-addressed, capped, redacted,
covered by the chain, and audited by `wake verify`'s check."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ledgers import introspection, transcripts
from tests.support import agents as agent_configs
from tests.support import marked, wakes
from tests.support.openai_server import ScriptedServer, completion
from wake import logs, stores
from wake.config import Config
from wake.console import data as console_data
from wake.run import cycle
from wake.think import transcript as recorder


@pytest.fixture
def config(store_config: Callable[..., Config], server: ScriptedServer) -> Config:
    think = "[think]\ntool_timeout_s = 5\ntool_result_max_chars = 200\ntranscript_max_chars = 1000\n"
    extra = agent_configs.tools("think_tools") + agent_configs.scripted(server.url, max_retries=1) + think
    return store_config(extra, agents=agent_configs.toml(tiers={"surface": agent_configs.SURFACE}, extra=[agent_configs.PERSONA]))


async def _wake(config: Config) -> cycle.WakeOutcome:
    return await wakes.once(config, tier="surface")


async def _read(config: Config, wake_id: Any) -> tuple[transcripts.Stored, dict[str, Any]]:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        row = await introspection.get(conn, wake_id)
        assert row is not None
        return await transcripts.read(conn, wake_id), row.columns()


async def test_two_calls_are_recorded_with_arguments_answers_outcomes_and_the_root(config: Config, server: ScriptedServer) -> None:
    server.push(
        completion("Looking first.", [("local_time", {}), ("note_write", {"text": "all calm"})]),
        completion(None, [("not_bound", {"x": 1})]),
        completion("Checked the time, wrote a note."),
    )
    o = await _wake(config)
    assert o.status == "completed", o.error
    stored, row = await _read(config, o.wake_id)
    roles = [(m.role, m.turn) for m, _, _ in stored.messages]
    assert roles == [("system", 0), ("user", 0), ("assistant", 1), ("tool", 1), ("tool", 1), ("assistant", 2), ("tool", 2), ("assistant", 3)]
    bodies = [json.loads(body or "") for _, _, body in stored.messages]
    sent = server.requests[2].json["messages"]
    assert bodies[:7] == [json.loads(recorder.canonical(m)) for m in sent]  # exactly what the model was sent, in order
    assert bodies[7]["content"] == "Checked the time, wrote a note." == o.final_text
    calls = [(c.seq, c.turn, c.call_id, c.tool, c.outcome, c.answer_seq) for c, _, _ in stored.calls]
    assert calls == [(0, 1, "call_0", "local_time", "ok", 3), (1, 1, "call_1", "note_write", "ok", 4), (2, 2, "call_0", "not_bound", "refused", 6)]
    assert [json.loads(body or "") for _, _, body in stored.calls] == [{}, {"text": "all calm"}, {"x": 1}]
    assert json.loads(marked.plain(bodies[4]["content"])) == {"written": "all calm"} and "refused" in bodies[6]["content"]
    assert all(c.latency_ms >= 0 for c, _, _ in stored.calls)
    # the root follows from the records, the chain covers it, and the audit finds nothing
    assert row["transcript_root"] == transcripts.root_of([m for m, _, _ in stored.messages], [c for c, _, _ in stored.calls])
    assert transcripts.audit(stored, row) == []
    async with stores.connected(config) as st, st.pg_conn() as conn:
        walked = introspection.walk("demo", await introspection.chain_rows(conn, "demo"), await introspection.chain_head(conn, "demo"))
    assert walked.why is None and walked.rows == 1
    assert row["chain"] == introspection.chain_of(introspection.GENESIS, row["manifest_root"], row["transcript_root"])
    assert row["chain"] != introspection.chain_of(introspection.GENESIS, row["manifest_root"])
    # the console's wake page reads the same records: each assistant turn with the calls it made
    async with stores.connected(config) as st, st.pg_conn() as conn:
        turns = await console_data.transcript(conn, o.wake_id, row)
    # (labelled by the model turn, not the message's place; each answer once, under its call: no `tool` section)
    shown = [(t["label"], [(c["name"], c["arguments"], c["outcome"]) for c in t["calls"]]) for t in turns]
    assert shown == [
        ("system", []), ("user", []), ("turn 1 · assistant", [("local_time", {}, "ok"), ("note_write", {"text": "all calm"}, "ok")]),
        ("turn 2 · assistant", [("not_bound", {"x": 1}, "refused")]), ("turn 3 · assistant", []),
    ]
    assert turns[2]["calls"][1]["answer"] is not None and "all calm" in turns[2]["calls"][1]["answer"]
    assert sum("all calm" in (t["text"] + "".join(str(c["answer"]) for c in t["calls"])) for t in turns) == 1


async def test_bodies_are_capped_with_the_cap_stated_and_redacted_by_the_log_rules(config: Config, server: ScriptedServer) -> None:
    logs.register_secret("hunter2-the-secret")
    long_text = "y" * 1500
    server.push(
        completion(None, [("note_write", {"text": long_text}), ("note_write", {"text": "x", "password": "open sesame"})]),
        completion("Done; key sk-abcdefghijklmnop and hunter2-the-secret noted."),
    )
    o = await _wake(config)
    assert o.status == "completed", o.error
    stored, row = await _read(config, o.wake_id)
    (first, _, first_args), (second, _, second_args) = stored.calls
    assert first.outcome == "ok" and second.outcome == "error"  # the schema refuses the extra key
    assert first_args is not None and first_args.endswith("…[transcript: cut at 1000 of 1512 characters]")
    assert second_args is not None and json.loads(second_args) == {"text": "x", "password": "***"}
    assistant = stored.messages[2][0]
    assert (assistant.role, assistant.cut, assistant.chars) == ("assistant", True, 1512 + len(json.dumps({"text": "x", "password": "***"})))
    system, _, system_body = stored.messages[0]
    assert not system.cut and system.chars > 1000 and system_body is not None and len(json.loads(system_body)["content"]) == system.chars
    final = json.loads(stored.messages[-1][2] or "")["content"]
    assert final == "Done; key *** and *** noted."
    assert transcripts.audit(stored, row) == []


async def test_the_audit_names_a_changed_body_a_removed_call_and_a_rewritten_root(config: Config, server: ScriptedServer) -> None:
    server.push(completion(None, [("local_time", {}), ("note_write", {"text": "a"})]), completion("ok."))
    o = await _wake(config)
    stored, row = await _read(config, o.wake_id)
    assert transcripts.audit(stored, row) == []
    answer, _, _ = stored.messages[3]
    async with stores.connected(config) as st, st.pg_conn() as conn:
        await conn.execute("UPDATE manifest_contents SET body = replace(body, 'Europe/Stockholm', 'Europe/Oslo') WHERE sha256 = $1", answer.sha256)
        await conn.execute("DELETE FROM wake_tool_calls WHERE wake_id = $1 AND seq = 1", o.wake_id)
        await conn.execute("UPDATE wake_introspection_ledger SET transcript_root = $2 WHERE wake_id = $1", o.wake_id, "c" * 64)
    stored, row = await _read(config, o.wake_id)
    found = dict(transcripts.audit(stored, row))
    assert found["transcript message 3"].startswith("its stored body hashes to ")
    assert found["tool call count"] == "the row counts 2 calls (0 refused); the transcript has 1 (0 refused)"
    assert found["transcript root"].startswith("the row's transcript root is " + "c" * 64 + "; its records give ")


async def test_a_wake_that_calls_no_model_has_no_transcript(store_config: Callable[..., Config]) -> None:
    config = store_config()
    o = await _wake_plain(config)
    stored, row = await _read(config, o.wake_id)
    assert stored.empty and row["transcript_root"] is None and transcripts.audit(stored, row) == []


async def _wake_plain(config: Config) -> cycle.WakeOutcome:
    return await wakes.once(config, tier="whisper")
