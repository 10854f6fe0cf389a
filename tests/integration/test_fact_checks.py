"""The fact_checks ledger over real PostgreSQL and real git: check rows, the reality retraction
written once per (fact, HEAD), its falsifier settled by a later check, and the anchor CHECK."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from codecheck import verify
from codecheck.workspace import Workspace
from ledgers import fact_checks, facts, retractions
from ledgers.errors import FactCheckError, FactError
from tests.support import gitrepo

NOW = dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC)
CODE = {"app/__init__.py": "", "app/cache.py": "import sqlite3\n\ndef get(k):\n    return sqlite3.connect(k)\n"}
REDIS = [{"type": "import", "ref": "redis", "where": "app/cache.py"}]
SQLITE = [{"type": "import", "ref": "sqlite3", "where": "app.cache.get"}]


async def _fact(conn: asyncpg.Connection, key: str, value: str, anchors: list[dict[str, Any]], agent: str = "demo") -> uuid.UUID:
    done = await facts.remember(conn, agent_id=agent, key=key, value=value, origin="did", recorded_at=NOW - dt.timedelta(days=1),
                                anchors=anchors)
    return done.fact_id


def _verdict(root: Path, anchors: list[dict[str, Any]]) -> verify.Verdict:
    return verify.verify_json(anchors, Workspace(root, runner="thread", head_ttl_s=0).fingerprint(timeout_s=60), 1000)


async def test_a_refuted_check_writes_one_retraction_per_fact_and_cause(conn: asyncpg.Connection, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    first_head = gitrepo.commit(root, CODE)
    fact_id = await _fact(conn, "cache_backend", "The cache keeps entries in Redis.", REDIS)
    refuted = _verdict(root, REDIS)
    assert refuted.status == verify.REFUTED and refuted.head == first_head
    one = await fact_checks.record(conn, agent_id="demo", fact_id=fact_id, verdict=refuted, checked_at=NOW)
    two = await fact_checks.record(conn, agent_id="demo", fact_id=fact_id, verdict=refuted, checked_at=NOW + dt.timedelta(minutes=15))
    assert one.new_retraction and not two.new_retraction
    assert one.retraction_id == two.retraction_id == fact_checks.retraction_id("demo", fact_id, refuted)
    assert one.retraction_id is not None
    row = await retractions.get(conn, one.retraction_id)
    assert row is not None
    assert row.caught_by == "reality" and row.claim_verbatim == "cache_backend: The cache keeps entries in Redis."
    assert row.why_wrong.startswith(f"checked against the workspace at HEAD {first_head[:12]}: import redis in app/cache.py: no import")
    assert "check the fact's anchors again at a HEAD later than" in row.test_procedure
    assert row.expected_retraction_pass_obs != row.overturn_retraction_condition
    assert row.verdict == "unchecked"

    second_head = gitrepo.commit(root, {"README.md": "unrelated\n"})
    again = _verdict(root, REDIS)
    assert again.status == verify.REFUTED and again.head == second_head
    three = await fact_checks.record(conn, agent_id="demo", fact_id=fact_id, verdict=again, checked_at=NOW + dt.timedelta(hours=1))
    assert not three.new_retraction and three.retraction_id == one.retraction_id  # the same cause at a new HEAD
    history, total = await fact_checks.history(conn, "demo", fact_id, 10)
    assert total == 3 and [h.head for h in history] == [second_head, first_head, first_head]
    assert await conn.fetchval("SELECT count(*) FROM retraction_ledger WHERE agent_id = 'demo'") == 1
    both = REDIS + [{"type": "symbol", "ref": "app.cache.Memcached"}]  # a second anchor fails: another cause
    other = await fact_checks.record(conn, agent_id="demo", fact_id=fact_id, verdict=_verdict(root, both),
                                     checked_at=NOW + dt.timedelta(hours=2))
    assert other.new_retraction and other.retraction_id != one.retraction_id
    # the fact itself stays active: verify-on-read keeps it out of arrivals while it is refuted at HEAD
    assert await conn.fetchval("SELECT status FROM facts WHERE fact_id = $1", fact_id) == "active"


async def test_a_check_at_a_later_head_settles_the_matured_falsifier(conn: asyncpg.Connection, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    gitrepo.commit(root, CODE)
    comes_true = await _fact(conn, "cache_backend", "The cache keeps entries in Redis.", REDIS)
    stays_false = await _fact(conn, "queue", "Jobs run on Celery.", [{"type": "package", "ref": "celery"}, {"type": "import", "ref": "celery"}])
    await fact_checks.record(conn, agent_id="demo", fact_id=comes_true, verdict=_verdict(root, REDIS), checked_at=NOW, maturity_days=0)
    celery = [{"type": "import", "ref": "celery"}]
    await fact_checks.record(conn, agent_id="demo", fact_id=stays_false, verdict=_verdict(root, celery), checked_at=NOW, maturity_days=0)
    # the same HEAD again settles nothing: the falsifier needs a later HEAD
    same = await fact_checks.record(conn, agent_id="demo", fact_id=comes_true, verdict=_verdict(root, REDIS),
                                    checked_at=NOW + dt.timedelta(hours=1))
    assert same.settled == []

    later = gitrepo.commit(root, {"app/cache.py": "import redis\n\ndef get(k):\n    return redis.Redis().get(k)\n"})
    inconclusive = verify.unavailable("could not check: the workspace was busy", later)
    assert (await fact_checks.record(conn, agent_id="demo", fact_id=comes_true, verdict=inconclusive,
                                     checked_at=NOW + dt.timedelta(hours=2))).settled == []
    upheld = await fact_checks.record(conn, agent_id="demo", fact_id=comes_true, verdict=_verdict(root, REDIS),
                                      checked_at=NOW + dt.timedelta(hours=3))
    assert [s.verdict for s in upheld.settled] == ["upheld"]
    assert upheld.settled[0].falsifier_outcome.startswith(f"checked again at HEAD {later[:12]}")
    overturned = await fact_checks.record(conn, agent_id="demo", fact_id=stays_false, verdict=_verdict(root, celery),
                                          checked_at=NOW + dt.timedelta(hours=3))
    assert [s.verdict for s in overturned.settled] == ["overturned"]
    # the same cause at the new HEAD: the same retraction, which now stands settled; no second one is written
    assert not overturned.new_retraction and overturned.retraction_id == overturned.settled[0].id


async def test_checks_read_back_newest_per_fact_with_the_exact_total(conn: asyncpg.Connection, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    head = gitrepo.commit(root, CODE)
    wake_id = uuid.uuid4()
    await conn.execute("INSERT INTO wake_introspection_ledger (wake_id, agent_id, tier, trigger, status, started_at, finished_at, "
                       "host, pid, version, config_hash, manifest_root) VALUES ($1, 'demo', 'full', 'manual', 'completed', $2, $2, "
                       "'h', 1, '0', 'c', $3)", wake_id, NOW, 'a' * 64)
    a = await _fact(conn, "cache", "sqlite3 backs the cache", SQLITE)
    b = await _fact(conn, "other", "no anchors here", [])
    await fact_checks.record(conn, agent_id="demo", fact_id=a, verdict=_verdict(root, SQLITE), checked_at=NOW, wake_id=wake_id)
    await fact_checks.record(conn, agent_id="demo", fact_id=b, verdict=verify.unavailable("no code anchors to check", head),
                             checked_at=NOW + dt.timedelta(minutes=1))
    await fact_checks.record(conn, agent_id="demo", fact_id=a, verdict=verify.unavailable("over the 50 ms budget"),
                             checked_at=NOW + dt.timedelta(minutes=2))
    rows, total = await fact_checks.latest(conn, "demo", 1)
    assert total == 2 and len(rows) == 1
    assert rows[0].fact_id == a and rows[0].status == "inconclusive" and rows[0].head is None
    history, _ = await fact_checks.history(conn, "demo", a, 10)
    assert [(h.status, h.wake_id) for h in history] == [("inconclusive", None), ("verified", wake_id)]
    assert history[1].evidence.startswith("import sqlite3 at app/cache.py:1") and history[1].retraction_id is None


async def test_record_refuses_what_it_cannot_stand_behind(conn: asyncpg.Connection, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    gitrepo.commit(root, CODE)
    theirs = await _fact(conn, "k", "v", REDIS, agent="other")
    with pytest.raises(FactCheckError, match="no fact .* for agent 'demo'"):
        await fact_checks.record(conn, agent_id="demo", fact_id=theirs, verdict=_verdict(root, REDIS), checked_at=NOW)
    headless = verify.Verdict(status=verify.REFUTED, evidence="x", head=None)
    with pytest.raises(FactCheckError, match="names the HEAD"):
        await fact_checks.record(conn, agent_id="other", fact_id=theirs, verdict=headless, checked_at=NOW)
    assert await conn.fetchval("SELECT count(*) FROM fact_checks") == 0
    with pytest.raises(asyncpg.CheckViolationError, match="fact_checks_refuted_retracts"):
        await conn.execute("INSERT INTO fact_checks (fact_id, agent_id, status, evidence, head, checked_at) "
                           "VALUES ($1, 'other', 'refuted', 'x', $2, $3)", theirs, "a" * 40, NOW)
    partly = verify.Verdict(status=verify.PARTLY, evidence="80 not checked", head="a" * 40, uncovered=("80",))
    assert (await fact_checks.record(conn, agent_id="other", fact_id=theirs, verdict=partly, checked_at=NOW)).retraction_id is None
    assert await conn.fetchval("SELECT status FROM fact_checks") == "partly"  # 0020: a status of its own
    with pytest.raises(asyncpg.CheckViolationError, match="fact_checks_status_check"):
        await conn.execute("INSERT INTO fact_checks (fact_id, agent_id, status, evidence, head, checked_at) "
                           "VALUES ($1, 'other', 'settled', 'x', $2, $3)", theirs, "a" * 40, NOW)


@pytest.mark.parametrize("anchors", [
    [{"type": "file", "ref": "workers/canary/probe.txt"}, {"type": "message", "ref": str(uuid.uuid4())},
     {"type": "wake", "ref": "x"}, {"type": "url", "ref": "https://x.org"}],  # the shape every earlier row has
    [{"type": "import", "ref": "httpcore", "where": "httpx/_transports"}, {"type": "package", "ref": "h2", "ecosystem": "python"},
     {"type": "absent", "anchor": {"type": "env", "ref": "X", "where": "a.py"}}, {"type": "symbol", "ref": "a.B", "inferred": True}],
    [{"type": "package", "ref": "h2", "scope": "extra:http2"}, {"type": "absent", "anchor": {"type": "package", "ref": "h2", "scope": "required"}},
     *({"type": "file", "ref": "x" * 500} for _ in range(14))],               # the bounds themselves: 16 anchors, 500 characters
    [{"type": "dir", "ref": "rich/live"}, {"type": "absent", "anchor": {"type": "dir", "ref": "rich/markdown"}},   # 0020's kinds
     {"type": "signature", "ref": "rich.progress.track", "params": "sequence, total=None"},
     {"type": "value", "ref": "rich.console.JUPYTER_DEFAULT_COLUMNS", "value": "115"}],
])
async def test_the_anchor_check_accepts_old_and_typed_shapes(conn: asyncpg.Connection, anchors: list[dict[str, Any]]) -> None:
    stored = await conn.fetchval("INSERT INTO facts (agent_id, fact_key, fact_value, origin, anchors, recorded_at) "
                                 "VALUES ('demo', 'k', 'v', 'did', $1::jsonb, $2) RETURNING anchors", json.dumps(anchors), NOW)
    assert json.loads(stored) == anchors  # the CHECK let it in, as written


@pytest.mark.parametrize("anchors", [
    {"type": "file", "ref": "x"},                                              # not a list
    [{"type": "hunch", "ref": "x"}],
    [{"type": "file", "ref": ""}],
    [{"type": "file", "ref": 3}],
    [{"type": "file", "ref": "x", "where": "y"}],                              # where on a file
    [{"type": "package", "ref": "x", "ecosystem": "cargo"}],
    [{"type": "absent", "anchor": {"type": "absent", "anchor": {"type": "file", "ref": "x"}}}],
    [{"type": "absent", "anchor": {"type": "url", "ref": "x"}}],
    [{"type": "absent", "anchor": {"type": "file", "ref": "x", "inferred": True}}],
    [{"type": "import", "ref": "x", "color": "red"}],
    [{"type": "package", "ref": "h2", "scope": "sometimes"}],
    [{"type": "import", "ref": "h2", "scope": "required"}],                     # scope on an import
    [{"type": "file", "ref": "x"}] * 17,                                       # one anchor over the cap
    [{"type": "symbol", "ref": "a." * 250 + "b"}],                              # 501 characters
    [{"type": "absent", "anchor": {"type": "import", "ref": "x", "where": "a/" * 251}}],
    ["file"],
    [{"type": "signature", "ref": "a.f"}],                                     # a signature states its params
    [{"type": "value", "ref": "a.X", "value": 80}],                            # as source text
    [{"type": "import", "ref": "a", "params": "x"}],                           # params only on a signature
    [{"type": "absent", "anchor": {"type": "value", "ref": "a.X", "value": "1"}}],  # absent wraps no value
])
async def test_the_anchor_check_refuses_other_shapes(conn: asyncpg.Connection, anchors: Any) -> None:
    with pytest.raises(asyncpg.CheckViolationError, match="facts_anchors_(typed|check|bounded)"):  # a non-list: 0006's own CHECK
        await conn.execute("INSERT INTO facts (agent_id, fact_key, fact_value, origin, anchors, recorded_at) "
                           "VALUES ('demo', 'k', 'v', 'did', $1::jsonb, $2)", json.dumps(anchors), NOW)


async def test_remember_stores_typed_anchors_and_refuses_bad_ones_by_name(conn: asyncpg.Connection) -> None:
    stored = [{"type": "absent", "anchor": {"type": "import", "ref": "redis"}}, {"type": "import", "ref": "a.b", "where": "pkg/"}]
    fact_id = await _fact(conn, "k", "v", stored)
    assert json.loads(await conn.fetchval("SELECT anchors FROM facts WHERE fact_id = $1", fact_id)) == [
        stored[0], {"type": "import", "ref": "a.b", "where": "pkg/"}]  # a directory stays a path: `pkg` would be a module
    with pytest.raises(FactError, match=r"anchors\[0\] \(file '\.\./x'\): '\.\.' escapes the workspace"):
        await _fact(conn, "k2", "v", [{"type": "file", "ref": "../x"}])


async def test_the_arrival_rows_verify_as_stored(conn: asyncpg.Connection, tmp_path: Path) -> None:
    """The path the facts arrival source takes: for_arrival rows (with the query's `check` on each
    anchor) straight into verify.check, then each verdict recorded."""
    root = tmp_path / "repo"
    gitrepo.commit(root, CODE)
    message = await conn.fetchval("INSERT INTO human_contact (agent_id, author, channel, body, received_at) "
                                  "VALUES ('demo', 'henke', 'chat', 'sqlite3 it is', $1) RETURNING message_id", NOW)
    good = await _fact(conn, "cache", "sqlite3 backs the cache", [*SQLITE, {"type": "message", "ref": str(message)}])
    bad = await _fact(conn, "cache_backend", "The cache keeps entries in Redis.", REDIS)
    prose = await _fact(conn, "prose", "the cache does `import sqlite3`", [])
    rows, active, _ = await facts.for_arrival(conn, "demo", "UTC", limit=10, chain_depth=0)
    assert active == 3 and {a.get("check") for r in rows for a in r.anchors} == {"unchecked", "found"}
    checked = await verify.check(Workspace(root, runner="thread"), [(r.anchors, r.fact_value) for r in rows], 5000)
    by_fact = {r.fact_id: v for r, v in zip(rows, checked.verdicts, strict=True)}
    assert by_fact[good].status == verify.VERIFIED
    assert by_fact[bad].status == verify.REFUTED
    assert by_fact[prose].status == verify.INCONCLUSIVE and "inferred from prose" in by_fact[prose].evidence
    for fact_id, verdict in by_fact.items():
        await fact_checks.record(conn, agent_id="demo", fact_id=fact_id, verdict=verdict, checked_at=NOW)
    latest, total = await fact_checks.latest(conn, "demo", 10)
    assert total == 3 and sorted(r.status for r in latest) == ["inconclusive", "refuted", "verified"]
