"""`wake verify`, `wake verify --chain` and `wake show --arrival` as subprocesses, against a ledger
someone has edited by hand."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable

from tests.support.daemon_proc import query
from wake.config import Config
from wake.witness import manifest

CLI = Callable[..., subprocess.CompletedProcess[str]]


def test_verify_names_what_was_changed_and_the_chain_catches_a_consistent_rewrite(
    wake_cli: CLI, store_config: Callable[..., Config], pg_dsn: str,
) -> None:
    config = store_config()
    c = ("--config", str(config.path))
    ids = []
    for _ in range(3):
        done = wake_cli(*c, "up", "--json")
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["wake_id"])
    assert [json.loads(line)["chain"] is not None for line in done.stderr.splitlines()
            if line.startswith("{") and json.loads(line)["event"] == "wake.settled"] == [True]
    victim = uuid.UUID(ids[1])

    clean = wake_cli(*c, "verify", ids[1])
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.splitlines()[1].endswith("OK") and "chain link 2 " in clean.stdout
    chained = wake_cli(*c, "verify", "--chain")
    assert chained.returncode == 0 and chained.stdout.startswith("demo: OK, 3 link(s); head link 3 "), chained.stdout

    arrival = wake_cli(*c, "show", ids[1], "--arrival")
    assert arrival.returncode == 0 and arrival.stdout.startswith("## ") and "\n## identity\n" in "\n" + arrival.stdout

    [row] = query(pg_dsn, "SELECT blocks, tool_hashes FROM wake_introspection_ledger WHERE wake_id = $1", victim)
    blocks = {n: b["hash"] for n, b in json.loads(row["blocks"]).items()}
    query(pg_dsn, "UPDATE wake_introspection_ledger SET blocks = jsonb_set(blocks, '{identity,hash}', to_jsonb($2::text)) WHERE wake_id = $1",
         victim, "b" * 64)
    tampered = wake_cli(*c, "verify", ids[1])
    assert tampered.returncode == 1
    assert "MISMATCH" in tampered.stdout and "  block identity: no stored block has the row's hash " + "b" * 64 in tampered.stdout
    assert "  root: the row's root is " in tampered.stdout

    # a consistent rewrite: the identity hash put back, a tool removed from the list, the hashes
    # and the count, and the root recomputed to match
    tools = json.loads(row["tool_hashes"])
    dropped = sorted(tools)[0]
    del tools[dropped]
    query(pg_dsn, "UPDATE wake_introspection_ledger SET blocks = jsonb_set(blocks, '{identity,hash}', to_jsonb($2::text)),"
         " tool_hashes = $3::jsonb, active_tool_names = $4, active_tools_count = $5, manifest_root = $6 WHERE wake_id = $1",
         victim, blocks["identity"], json.dumps(tools), sorted(tools), len(tools), manifest.root_hash("demo", "whisper", blocks, tools))
    rewritten = wake_cli(*c, "verify", ids[1])
    assert rewritten.returncode == 0, rewritten.stdout  # every stored part agrees with the others
    broken = wake_cli(*c, "verify", "--chain", "--agent", "demo")
    assert broken.returncode == 1
    lines = broken.stdout.splitlines()
    assert lines[0].startswith("demo: BROKEN (3 link(s) stored)")
    assert lines[1].startswith(f"  first broken row: wake {ids[1]} (link 2, completed, started ")

    usage = wake_cli(*c, "verify", ids[1], "--chain")
    assert usage.returncode == 2 and "--chain walks every row of an agent" in usage.stderr
