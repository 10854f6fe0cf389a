"""`wake show --transcript`, `wake verify` over the transcript and `wake actions`, as subprocesses,
after a wake whose model (the scripted server on loopback) made two tool calls."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

from ledgers import transcripts
from tests.support import marked, pooler
from tests.support.daemon_proc import query
from tests.support.openai_server import ScriptedServer, completion

CLI = Callable[..., subprocess.CompletedProcess[str]]


def _config(tmp_path: Path, server: ScriptedServer, pg_dsn: str, redis_url: str) -> Path:
    (tmp_path / "persona.md").write_text("You are a careful agent.\n")
    path = tmp_path / "wake.toml"
    path.write_text(
        f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n'
        '[tools]\nmodules = ["tests.support.think_tools"]\n'
        f'[models.scripted]\nbase_url = "{server.url}"\nmodel = "scripted-1"\n'
        '[agents.demo]\npersona_files = ["persona.md"]\n'
        '[agents.demo.tiers.whisper]\nbinds = ["wake.whisper"]\n'
        '[agents.demo.tiers.surface]\nbinds = ["wake.whisper", "wake.surface"]\nmodel = "scripted"\n'
    )
    return path


def test_show_transcript_prints_both_calls_and_verify_and_the_chain_cover_it(
    wake_cli: CLI, tmp_path: Path, pg_dsn: str, redis_url: str,
) -> None:
    with ScriptedServer() as server:
        server.push(
            completion("Checking two things.", [("local_time", {}), ("note_write", {"text": "the garden is watered"})]),
            completion("Daybook: checked the time and wrote a note."),
        )
        c = ("--config", str(_config(tmp_path, server, pg_dsn, redis_url)))
        up = wake_cli(*c, "up", "--tier", "surface")
    assert up.returncode == 0, up.stderr
    wake_id = up.stdout.splitlines()[0].removeprefix("wake ")

    shown = wake_cli(*c, "show", wake_id[:8], "--transcript")
    assert shown.returncode == 0, shown.stderr
    text = marked.plain(shown.stdout)
    assert "6 messages, 2 tool calls; transcript root " in text
    assert "### 0 system (turn 0)\nYou are a long-lived agent" in text and "### 1 user (turn 0)\n" in text
    assert "### 2 assistant (turn 1)\nChecking two things.\n" in text
    assert "call call_0: local_time {}  -> ok (answer 3)" in text
    assert 'call call_1: note_write {"text": "the garden is watered"}  -> ok (answer 4)' in text
    assert "### 3 tool answer to call_0 local_time: ok, " in text and '"timezone"' in text.split("### 3 ")[1].split("### 4 ")[0]
    assert '### 4 tool answer to call_1 note_write: ok, ' in text and '{"written": "the garden is watered"}' in text
    assert text.rstrip().endswith("### 5 assistant (turn 2)\nDaybook: checked the time and wrote a note.")

    as_json = json.loads(wake_cli(*c, "show", wake_id, "--transcript", "--json").stdout)
    assert [(k["tool"], json.loads(k["arguments"]), k["ok"]) for k in as_json["calls"]] == [
        ("local_time", {}, True), ("note_write", {"text": "the garden is watered"}, True),
    ]
    assert json.loads(marked.plain(as_json["calls"][1]["answer"])) == {"written": "the garden is watered"}
    assert [m["role"] for m in as_json["messages"]] == ["system", "user", "assistant", "tool", "tool", "assistant"]

    both = wake_cli(*c, "show", wake_id, "--transcript", "--arrival")
    assert both.returncode == 2 and "give --arrival or --transcript, not both" in both.stderr

    clean = wake_cli(*c, "verify", wake_id)
    assert clean.returncode == 0, clean.stdout
    assert f"transcript root {as_json['transcript_root']}  (6 messages, 2 tool calls, each body rehashed)" in clean.stdout

    # an answer edited in the content store: verify names the message
    answer_sha = as_json["messages"][4]["sha256"]
    query(pg_dsn, "UPDATE manifest_contents SET body = replace(body, 'watered', 'flooded') WHERE sha256 = $1", answer_sha)
    edited = wake_cli(*c, "verify", wake_id)
    assert edited.returncode == 1 and "  transcript message 4: its stored body hashes to " in edited.stdout, edited.stdout
    query(pg_dsn, "UPDATE manifest_contents SET body = replace(body, 'flooded', 'watered') WHERE sha256 = $1", answer_sha)

    # a consistent rewrite (a new body, its hash on the record, the root recomputed) passes verify;
    # the chain link, which covers the transcript root, breaks
    [body_row] = query(pg_dsn, "SELECT body FROM manifest_contents WHERE sha256 = $1", answer_sha)
    forged = body_row["body"].replace("watered", "flooded")
    wid = uuid.UUID(wake_id)
    query(pg_dsn, "INSERT INTO manifest_contents (sha256, kind, body) VALUES ($1, 'message', $2)", transcripts.sha256(forged), forged)
    query(pg_dsn, "UPDATE wake_transcript SET sha256 = $2 WHERE wake_id = $1 AND seq = 4", wid, transcripts.sha256(forged))
    records = query(pg_dsn, "SELECT seq, turn, role, sha256, chars, cut FROM wake_transcript WHERE wake_id = $1 ORDER BY seq", wid)
    calls = query(pg_dsn, "SELECT seq, turn, call_id, tool, arguments_sha256, answer_seq, outcome, latency_ms FROM wake_tool_calls"
                          " WHERE wake_id = $1 ORDER BY seq", wid)
    root = transcripts.root_of([transcripts.Message(**dict(r)) for r in records], [transcripts.Call(**dict(r)) for r in calls])
    query(pg_dsn, "UPDATE wake_introspection_ledger SET transcript_root = $2 WHERE wake_id = $1", wid, root)
    rewritten = wake_cli(*c, "verify", wake_id)
    assert rewritten.returncode == 0, rewritten.stdout
    assert "flooded" in wake_cli(*c, "show", wake_id, "--transcript").stdout
    chain = wake_cli(*c, "verify", "--chain")
    assert chain.returncode == 1 and chain.stdout.splitlines()[1].startswith(f"  first broken row: wake {wake_id} (link 1, completed"), chain.stdout

    listed = wake_cli(*c, "actions")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["ACTED", "(UTC)", "SURFACE", "TOOL", "WAKE", "FENCE", "SUMMARY"]
    assert "wake.surface" in lines[1] and "note_write" in lines[1] and wake_id[:8] in lines[1] and lines[-1].startswith("1 of 1 since ")
    rows = json.loads(wake_cli(*c, "actions", "--json").stdout)
    assert rows["total"] == 1 and rows["rows"][0]["arguments"] == {"text": "the garden is watered"}
    bad = wake_cli(*c, "actions", "--since", "yesterday")
    assert bad.returncode == 2 and 'expected a duration such as "48h" or an ISO 8601 time' in bad.stderr
    assert "no confirmed actions since " in wake_cli(*c, "actions", "--since", "2099-01-01T00:00+00:00").stdout


def test_show_transcript_of_a_wake_that_called_no_model(wake_cli: CLI, tmp_path: Path, pg_dsn: str, redis_url: str) -> None:
    with ScriptedServer() as server:
        c = ("--config", str(_config(tmp_path, server, pg_dsn, redis_url)))
        up = wake_cli(*c, "up", "--json")  # the whisper has no model route
    assert up.returncode == 0, up.stderr
    wake_id = json.loads(up.stdout)["wake_id"]
    shown = wake_cli(*c, "show", wake_id, "--transcript")
    assert shown.returncode == 0 and shown.stdout.rstrip().endswith("(no transcript: this wake sent nothing to a model)")
    verified = wake_cli(*c, "verify", wake_id)
    assert verified.returncode == 0 and "transcript: none (this wake sent nothing to a model)" in verified.stdout
