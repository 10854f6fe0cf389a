"""`wake facts --check`, `wake workspace status` and `wake retract --fact` as subprocesses, over a
real git repository and the suite's PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pygit2

from ledgers import facts
from tests.support import gitrepo, marked
from wake.config import Config

CLI = Callable[..., subprocess.CompletedProcess[str]]
NOW = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)
CODE: dict[str, str | bytes] = {
    "app/__init__.py": "",
    "app/cache.py": "import sqlite3\n\ndef get(k):\n    return sqlite3.connect(k)\n",
    "app/broken.py": "def (:\n",
}
AGENT = """
[agents.demo]
timezone = "UTC"
persona_files = ["persona.md"]
workspace = "{workspace}"

[agents.demo.verify]
budget_ms = 60000   # the tests count verdicts; a 50 ms budget on a loaded machine would make them timing

[agents.demo.tiers.whisper]
every = "15m"
binds = ["wake.whisper"]
sources = ["provenance_facts"]
"""
FALSIFIER = [
    "--claim-verbatim", "the cache uses memcached", "--stood-on", "a guess", "--why-wrong", "the code imports sqlite3",
    "--corrected-claim", "the cache uses sqlite3", "--test-procedure", "read app/cache.py",
    "--expected-retraction-pass-obs", "sqlite3 is imported", "--overturn-retraction-condition", "memcached is imported",
]


def _seed(dsn: str, rows: list[tuple[str, str, list[dict[str, Any]]]]) -> dict[str, uuid.UUID]:
    async def body() -> dict[str, uuid.UUID]:
        conn = await asyncpg.connect(dsn)
        try:
            out = {}
            async with conn.transaction():
                for key, value, anchors in rows:
                    out[key] = (await facts.remember(conn, agent_id="demo", key=key, value=value, origin="did",
                                                     recorded_at=NOW, anchors=anchors)).fact_id
            return out
        finally:
            await conn.close()

    return asyncio.run(body())


def test_facts_check_shows_each_verdict_and_records_it(wake_cli: CLI, store_config: Callable[..., Config], pg_dsn: str,
                                                       tmp_path: Path) -> None:
    head = gitrepo.commit(tmp_path / "repo", CODE)
    config = store_config(agents=AGENT.format(workspace="repo"))
    cfg = ["--config", str(config.path)]
    assert wake_cli(*cfg, "migrate").returncode == 0
    ids = _seed(pg_dsn, [
        ("index", "get opens sqlite3", [{"type": "import", "ref": "sqlite3", "where": "app.cache.get"}]),
        ("cache", "the cache uses redis", [{"type": "import", "ref": "redis", "where": "app/cache.py"}]),
        ("broken", "broken.py reads json", [{"type": "import", "ref": "json", "where": "app/broken.py"}]),
        ("docs", "the docs are online", [{"type": "url", "ref": "https://example.org"}]),
    ])

    up = wake_cli(*cfg, "up", "--dry-run")  # a fresh process: the fingerprint is built (in the worker) before the wake
    assert up.returncode == 0, up.stderr
    assert f"code anchors checked at HEAD {head[:8]}: 1 verified, 1 refuted (left out), 2 inconclusive (1 with no code anchor)" in up.stdout
    assert f"get opens sqlite3 ⟦import sqlite3 in app.cache.get⟧ ⟦verified @{head[:8]}⟧" in marked.plain(up.stdout)
    assert "the cache uses redis" not in up.stdout

    dry = wake_cli(*cfg, "facts", "--check", "--no-record", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    by_key = {f["fact_key"]: f for f in report["facts"]}
    assert report["checked"] == 3 and set(by_key) == {"index", "cache", "broken"}  # the url-only fact has nothing to check
    assert (by_key["index"]["status"], by_key["cache"]["status"], by_key["broken"]["status"]) == ("verified", "refuted", "inconclusive")
    assert all(f["head"] == head and f["recorded"] is False for f in report["facts"])
    assert "app/broken.py was skipped" in by_key["broken"]["evidence"]
    assert by_key["cache"]["fact_id"] == str(ids["cache"])

    human = wake_cli(*cfg, "facts", "--check")
    assert human.returncode == 0, human.stderr
    assert f"refuted      @{head[:8]}  cache: the cache uses redis" in marked.plain(human.stdout)
    assert human.stdout.rstrip().endswith("3 checked: 1 verified, 1 refuted, 1 inconclusive (recorded in fact_checks); "
                                          "1 of 4 active facts not checked: 1 with no code anchor (arrivals show them inconclusive)")

    async def counts() -> tuple[int, int]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return (await conn.fetchval("SELECT count(*) FROM fact_checks WHERE wake_id IS NULL"),
                    await conn.fetchval("SELECT count(*) FROM retraction_ledger WHERE caught_by = 'reality'"))
        finally:
            await conn.close()

    assert asyncio.run(counts()) == (3, 1)  # the dry run and --no-record wrote nothing; this one its three checks and one retraction


def test_retract_naming_a_fact_refutes_it(wake_cli: CLI, store_config: Callable[..., Config], pg_dsn: str, tmp_path: Path) -> None:
    gitrepo.commit(tmp_path / "repo", CODE)
    config = store_config(agents=AGENT.format(workspace="repo"))
    cfg = ["--config", str(config.path)]
    assert wake_cli(*cfg, "migrate").returncode == 0
    ids = _seed(pg_dsn, [("cache", "the cache uses memcached", [])])

    unknown = wake_cli(*cfg, "retract", *FALSIFIER, "--fact", str(uuid.uuid4()))
    assert unknown.returncode == 65 and unknown.stderr.count("\n") == 1 and "no fact" in unknown.stderr
    malformed = wake_cli(*cfg, "retract", *FALSIFIER, "--fact", "cache")
    assert malformed.returncode == 65 and "fact_id must be a fact's full uuid" in malformed.stderr
    assert json.loads(wake_cli(*cfg, "retractions", "--json").stdout)["total"] == 0  # nothing stored

    done = wake_cli(*cfg, "retract", *FALSIFIER, "--fact", str(ids["cache"]))
    assert done.returncode == 0, done.stderr
    assert f"fact {ids['cache']} is marked refuted" in done.stdout
    listed = json.loads(wake_cli(*cfg, "facts", "--all", "--json").stdout)
    assert [f["status"] for f in listed["facts"]] == ["refuted"]


def test_workspace_status_and_its_failures(wake_cli: CLI, store_config: Callable[..., Config], tmp_path: Path) -> None:
    head = gitrepo.commit(tmp_path / "repo", CODE)
    config = store_config(agents=AGENT.format(workspace="repo"))
    cfg = ["--config", str(config.path)]

    shown = wake_cli(*cfg, "workspace", "status", "--json")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["head"] == head and status["root"] == str((tmp_path / "repo").resolve()) and status["error"] is None
    assert status["skipped"] == [{"path": "app/broken.py", "reason": "syntax error at line 1: invalid syntax"}]
    assert status["parsed"] >= 2 and status["size"]["files"] == 3
    human = wake_cli(*cfg, "workspace", "status")
    assert human.returncode == 0 and f"HEAD             {head}" in human.stdout
    assert "skipped app/broken.py: syntax error at line 1" in human.stdout

    (tmp_path / "plain").mkdir()
    plain = store_config(agents=AGENT.format(workspace="plain"))
    not_repo = wake_cli("--config", str(plain.path), "workspace", "status")
    assert not_repo.returncode == 66 and not_repo.stdout == ""
    assert not_repo.stderr.count("\n") == 1 and "not_a_repository" in not_repo.stderr and "Traceback" not in not_repo.stderr

    pygit2.init_repository(str(tmp_path / "empty"))
    empty = store_config(agents=AGENT.format(workspace="empty"))
    unborn = wake_cli("--config", str(empty.path), "workspace", "status")
    assert unborn.returncode == 65 and "no_commits" in unborn.stderr

    unset = store_config(agents=AGENT.replace('workspace = "{workspace}"\n', ""))
    none = wake_cli("--config", str(unset.path), "workspace", "status")
    assert none.returncode == 78 and "agents.demo.workspace" in none.stderr and none.stderr.count("\n") == 1
    checked = wake_cli("--config", str(unset.path), "facts", "--check")
    assert checked.returncode == 78 and "agents.demo.workspace" in checked.stderr


def test_facts_lists_every_anchor_kind_and_check_says_what_it_did_not_check(
        wake_cli: CLI, store_config: Callable[..., Config], pg_dsn: str, tmp_path: Path) -> None:
    head = gitrepo.commit(tmp_path / "repo", CODE)
    config = store_config(agents=AGENT.format(workspace="repo"))
    cfg = ["--config", str(config.path)]
    assert wake_cli(*cfg, "migrate").returncode == 0
    _seed(pg_dsn, [
        ("index", "get opens sqlite3", [{"type": "import", "ref": "sqlite3", "where": "app.cache.get"}]),
        ("no_requests", "the cache does not use requests",
         [{"type": "absent", "anchor": {"type": "import", "ref": "requests", "where": "app/cache.py"}}]),
        ("prose", "we use Celery", []),
    ])
    listed = wake_cli(*cfg, "facts")
    assert listed.returncode == 0, listed.stderr
    shown = marked.plain(listed.stdout)
    assert "⟦absent import requests in app/cache.py⟧" in shown and "⟦import sqlite3 in app.cache.get⟧" in shown
    assert "Traceback" not in listed.stderr

    limited = wake_cli(*cfg, "facts", "--check", "--no-record", "--limit", "1")
    assert limited.returncode == 0, limited.stderr
    # one fact read of three active; the other two are not checked, and it says so
    assert "of 3 active facts not checked: beyond --limit 1" in limited.stdout.splitlines()[-1]
    assert json.loads(wake_cli(*cfg, "facts", "--check", "--no-record", "--limit", "1", "--json").stdout)["not_checked"]["beyond_limit"] == 2
    full = json.loads(wake_cli(*cfg, "facts", "--check", "--no-record", "--json").stdout)
    assert (full["checked"], full["active"], full["not_checked"]) == (2, 3, {"beyond_limit": 0, "no_code_anchor": 1})
    assert {f["fact_key"]: f["status"] for f in full["facts"]} == {"index": "verified", "no_requests": "verified"}
    assert all(f["head"] == head for f in full["facts"])

    (tmp_path / "plain").mkdir()
    plain = store_config(agents=AGENT.format(workspace="plain"))
    not_repo = wake_cli("--config", str(plain.path), "facts", "--check")
    assert not_repo.returncode == 66 and not_repo.stdout == "" and "not_a_repository" in not_repo.stderr
    assert not_repo.stderr.count("\n") == 1
