"""`wake memory ...` as a subprocess, over a memory the agent wrote in a real `wake up` (the scripted
model server on loopback), tampered with by the real git binary; and two `wake up` processes on
one agent, of which the lease lets one write."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import marked
from tests.support.memory_git import doc, git, requires_git
from tests.support.openai_server import Response, ScriptedServer, completion
from wake.config import Config

pytestmark = requires_git
CLI = Callable[..., subprocess.CompletedProcess[str]]
GARDEN = doc("How I grow tomatoes", "Water in the morning.\n")
WRITE_GARDEN = ("memory", {"command": "write", "path": "reference/garden.md", "content": GARDEN, "reason": "learnt it"})


def _config(store_config: Callable[..., Config], server: ScriptedServer) -> Config:
    extra = f'[models.scripted]\nbase_url = "{server.url}"\nmodel = "scripted-1"\ntimeout_s = 60\nmax_retries = 0\n'
    agents = ('[agents.demo]\npersona_files = ["persona.md"]\n'
              '[agents.demo.tiers.surface]\nbinds = ["wake.whisper", "wake.surface"]\nmodel = "scripted"\n')
    return store_config(extra, agents=agents)


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


def test_the_memory_commands_over_a_memory_the_agent_wrote_and_git_tampered_with(
    wake_cli: CLI, store_config: Callable[..., Config],
) -> None:
    with ScriptedServer() as server:
        config = _config(store_config, server)
        cfg = ("--config", str(config.path))

        def memory(*args: str) -> subprocess.CompletedProcess[str]:
            return wake_cli(*cfg, "memory", *args)

        server.push(completion(None, [WRITE_GARDEN]), completion("Noted the garden."))
        up = wake_cli(*cfg, "up", "--tier", "surface", "--json")
        assert up.returncode == 0, up.stderr
        woke = _json(up)
        assert "memory" in woke["tools"] and {"memory", "cloister"} <= {b["name"] for b in woke["blocks"]}

        listed = _json(memory("ls", "--json"))
        assert listed["total"] == 7 and "reference/garden.md" in {f["path"] for f in listed["files"]}
        text = memory("ls", "reference").stdout.splitlines()
        assert text[0].split() == ["PATH", "SIZE", "DESCRIPTION"] and any("garden.md" in line and "How I grow tomatoes" in line for line in text)
        assert text[-1].startswith("2 files at ")
        assert memory("show", "reference/garden.md").stdout == GARDEN
        assert _json(memory("show", "reference/garden.md", "--json"))["description"] == "How I grow tomatoes"

        repo = config.memory_path("demo")
        human = repo / "system" / "human" / "human.md"
        human.write_text(human.read_text().replace("## Identity\n\n(not written yet)", "## Identity\n\nSomeone else."))
        git(repo, "commit", "-q", "-am", "the human, by hand")
        bypass = git(repo, "rev-parse", "HEAD").strip()
        assert memory("diff").stdout.strip() == "(no uncommitted change)"
        assert "+Someone else." in _json(memory("diff", bypass[:10], "--json"))["diff"]

        log = _json(memory("log", "--json"))
        made = {c["commit"]: c["write"] for c in log["commits"]}
        assert made[bypass] is None and log["writes_recorded"] == 1
        tool_write = next(w for w in made.values() if w is not None)
        assert (tool_write["wake_id"], tool_write["tier"], tool_write["op"]) == (woke["wake_id"], "surface", "write")
        assert tool_write["reason"] == "learnt it"
        assert "NOT the memory tool's" in memory("log").stdout

        audit = memory("audit", "--json")
        assert audit.returncode == 1, audit.stderr  # a HALT is open
        found = _json(audit)
        assert {(n["severity"], n["rule"], n["path"]) for n in found["new"]} == {
            ("HALT", "bypass.commit", "system/human/human.md"), ("HALT", "fields.changed", "system/human/human.md"),
        }

        requests = len(server.requests)
        held = wake_cli(*cfg, "up", "--tier", "surface", "--json")
        assert held.returncode == 1 and len(server.requests) == requests  # halted: zero model requests
        halted = _json(held)
        assert halted["status"] == "halted" and halted["note"].startswith("halted: cloister HALT #") and "memory" not in halted["tools"]

        shown = _json(memory("findings", "--json"))
        assert shown["total"] == 2 and {f["state"] for f in shown["findings"]} == {"open"}
        reverted = memory("revert", bypass, "--by", "maria", "--note", "not who they are", "--json")
        assert reverted.returncode == 0, reverted.stderr
        undone = _json(reverted)
        assert sorted(undone["findings_reverted"]) == sorted(f["finding_id"] for f in shown["findings"]) and undone["halted"] is False
        assert "(not written yet)" in memory("show", "system/human/human.md").stdout
        assert memory("audit").returncode == 0  # the operator's revert is not a finding

        project = repo / "system" / "project" / "project.md"
        project.write_text(project.read_text() + "\nA line by hand.\n")  # uncommitted: WARN
        assert "+A line by hand." in memory("diff", "--path", "system/project/project.md").stdout
        warned = _json(memory("audit", "--json"))
        (warn,) = warned["new"]
        assert (warn["severity"], warn["rule"], warn["commit"]) == ("WARN", "worktree.modified", None)
        acked = memory("ack", str(warn["id"]), "--by", "maria", "--note", "my edit", "--json")
        assert acked.returncode == 0 and _json(acked)["acknowledged"] == [warn["id"]]
        again = memory("ack", str(warn["id"]), "--by", "maria")
        assert again.returncode == 1 and f"not open (unknown, or already acted on): #{warn['id']}" in again.stdout
        everything = _json(memory("findings", "--state", "all", "--json"))
        states = {f["finding_id"]: (f["state"], f["acked_by"]) for f in everything["findings"]}
        assert states[warn["id"]] == ("acknowledged", "maria") and everything["total"] == 3
        assert "acknowledged" in memory("findings", "--state", "acknowledged").stdout

        bad = memory("show", "../etc/passwd.md")
        assert bad.returncode == 65 and bad.stderr.strip().endswith("[path.dotdot]") and len(bad.stderr.strip().splitlines()) == 1
        unknown = memory("revert", "--finding", "999999", "--by", "maria")
        assert unknown.returncode == 65 and "[finding.unknown]" in unknown.stderr
        assert memory("revert", "--by", "maria").returncode == 2
        assert memory("ack", "1").returncode == 2  # --by is required


def test_two_processes_waking_one_agent_write_once_and_leave_a_sound_repository(
    wake_cli: CLI, store_config: Callable[..., Config],
) -> None:
    arrived, release = threading.Event(), threading.Event()
    turns: list[int] = []

    def answer(_request: dict[str, Any]) -> Response:
        turns.append(1)
        if len(turns) == 1:  # the first wake holds the lease, mid-thought, until the second has tried
            arrived.set()
            release.wait(timeout=300)
            return completion(None, [WRITE_GARDEN])
        return completion("Noted the garden.")

    with ScriptedServer(default=answer) as server:
        config = _config(store_config, server)
        command = ["--config", str(config.path), "up", "--tier", "surface", "--json"]
        first: dict[str, subprocess.CompletedProcess[str]] = {}
        runner = threading.Thread(target=lambda: first.update(done=wake_cli(*command, timeout=300)))
        runner.start()
        try:
            assert arrived.wait(timeout=240), "the first wake never reached the model"
            second = wake_cli(*command)
        finally:
            release.set()
            runner.join(timeout=300)
    assert second.returncode == 75 and "busy" in second.stderr  # the lease: the agent already has a wake
    assert first["done"].returncode == 0, first["done"].stderr
    repo = Path(config.memory_path("demo"))
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "2"  # the bootstrap and the one write
    assert git(repo, "status", "--porcelain") == ""
    git(repo, "fsck", "--strict")
    log = _json(wake_cli("--config", str(config.path), "memory", "log", "--json"))
    assert log["writes_recorded"] == 1 and log["commits"][0]["write"]["path"] == "reference/garden.md"


def test_a_nul_byte_committed_by_hand_is_a_finding_the_cli_shows_and_a_revert_clears(
    wake_cli: CLI, store_config: Callable[..., Config],
) -> None:
    config = store_config(agents='[agents.demo]\npersona_files = ["persona.md"]\n[agents.demo.tiers.surface]\nbinds = ["wake.whisper"]\n')
    cfg = ("--config", str(config.path))
    assert wake_cli(*cfg, "up", "--tier", "surface").returncode == 0
    repo = config.memory_path("demo")
    persona = repo / "system/persona/persona.md"
    persona.write_bytes(persona.read_bytes() + b"\nidentity: \x00\n")
    git(repo, "commit", "-q", "-am", "by hand")
    sha = git(repo, "rev-parse", "HEAD").strip()
    audit = wake_cli(*cfg, "memory", "audit")
    said = marked.plain(audit.stdout)  # the finding's place is marked data
    assert "Traceback" not in audit.stderr and "HALT bypass.commit system/persona/persona.md" in said, audit.stdout + audit.stderr
    found = _json(wake_cli(*cfg, "memory", "findings", "--json"))
    assert any("\\x00" in f["excerpt"] for f in found["findings"]), found
    halted = _json(wake_cli(*cfg, "up", "--tier", "surface", "--json"))
    assert "cloister HALT" in json.dumps(halted)
    reverted = wake_cli(*cfg, "memory", "revert", sha, "--by", "casey")
    assert reverted.returncode == 0, reverted.stderr
    after = wake_cli(*cfg, "up", "--tier", "surface", "--json")
    assert after.returncode == 0 and "cloister HALT" not in after.stdout, after.stdout + after.stderr
