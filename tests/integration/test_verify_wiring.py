"""Verify-on-read in the wake over real PostgreSQL, Redis and git: the facts block leaves refuted
facts out and marks the rest, the checks are recorded with the wake's row (one retraction per fact
and HEAD across wakes; nothing on a dry run), HEAD is followed within its TTL on an injectable
clock, and a retraction that names a fact refutes it where the settled-facts block shows it."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from codecheck import typed_anchors, workspace
from ledgers import facts
from surfaces import epistemic_tools, ledger_tools
from surfaces.errors import ToolInputError
from tests.support import gitrepo, ledger_ctx, marked, wakes
from wake import stores
from wake.arrival import code_check
from wake.config import Config
from wake.daemon import notify
from wake.daemon import service as daemon
from wake.run import cycle
from wake.stores import prepared

NOW = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)
CODE: dict[str, str | bytes] = {
    "app/__init__.py": "",
    "app/cache.py": "import sqlite3\n\ndef get(k):\n    return sqlite3.connect(k)\n",
    "app/broken.py": "def (:\n",
}
REDIS = [{"type": "import", "ref": "redis", "where": "app/cache.py"}]
SQLITE = [{"type": "import", "ref": "sqlite3", "where": "app.cache.get"}]
SKIPPED = [{"type": "import", "ref": "json", "where": "app/broken.py"}]

AGENT = """
[agents.demo]
timezone = "Europe/Stockholm"
persona_files = ["persona.md"]
workspace = "repo"

[agents.demo.verify]
budget_ms = 60000   # the test counts verdicts; a budget it could run out of would make them timing
head_ttl_s = 30

[agents.demo.tiers.whisper]
every = "15m"
binds = ["wake.whisper"]
sources = ["provenance_facts", "settled_facts"]
source_timeout_ms = 60000  # likewise: the default 1.5 s cut a cold first retrieval at load 6

[agents.demo.tiers.surface]
every = "1h"
binds = ["wake.whisper", "wake.surface"]
sources = ["provenance_facts", "settled_facts"]
source_timeout_ms = 60000
"""


class Clock:
    """The workspaces' monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The process's workspaces, on the test's clock and built in a thread."""
    c = Clock()
    monkeypatch.setattr(code_check, "WORKSPACES", workspace.Workspaces(clock=c, runner="thread"))
    return c


@pytest.fixture
async def opened(store_config: Callable[..., Config], tmp_path: Path) -> AsyncIterator[tuple[Config, stores.Stores, str]]:
    head = gitrepo.commit(tmp_path / "repo", CODE)
    config = store_config(agents=AGENT)
    st = await stores.open_stores(config, neo4j=False)
    await prepared.prepare_schema(st)
    try:
        yield config, st, head
    finally:
        await st.close()


async def _fact(st: stores.Stores, key: str, value: str, anchors: list[dict[str, Any]], **kw: Any) -> uuid.UUID:
    async with st.pg_conn() as conn, conn.transaction():
        done = await facts.remember(conn, agent_id="demo", key=key, value=value, origin="did", recorded_at=NOW, anchors=anchors, **kw)
    return done.fact_id


def _block(outcome: cycle.WakeOutcome, name: str) -> str:
    block = next(b for b in outcome.blocks if b.name == name)
    assert block.retrieval == "ok", block.reason
    return marked.plain(block.text)


async def _count(st: stores.Stores, sql: str, *args: Any) -> int:
    async with st.pg_conn() as conn:
        return int(await conn.fetchval(sql, *args))


async def test_the_facts_block_leaves_refuted_facts_out_and_records_one_retraction_per_head(
    opened: tuple[Config, stores.Stores, str], clock: Clock,
) -> None:
    config, st, head = opened
    old = await _fact(st, "cache", "the cache uses memcached", [])
    async with st.pg_conn() as conn, conn.transaction():
        redis = (await facts.supersede(conn, agent_id="demo", fact_id=old, value="the cache uses redis", origin="did",
                                       recorded_at=NOW + dt.timedelta(minutes=1), anchors=REDIS)).fact_id
    sqlite = await _fact(st, "index", "the cache's get opens sqlite3", SQLITE)
    skipped = await _fact(st, "broken", "broken.py reads json", SKIPPED)
    await _fact(st, "docs", "the docs are online", [{"type": "url", "ref": "https://example.org"}])

    first = await wakes.run(config, st, agent_id="demo", tier="whisper")
    assert first.status == "completed", first.error
    text = _block(first, "provenance_facts")
    lines = text.splitlines()
    assert lines[0].endswith(f"code anchors checked at HEAD {head[:8]}: 1 verified, 1 refuted (left out), "
                             "2 inconclusive (1 with no code anchor)):")
    assert lines[0].startswith("Facts (3 of 4 active")
    assert "redis" not in text and "memcached" not in text  # the refuted fact and its chain are out
    index = next(line for line in lines if " index: " in line)
    assert index.endswith(f"⟦verified @{head[:8]}⟧")
    broken = next(line for line in lines if " broken: " in line)
    assert f"⟦inconclusive @{head[:8]}: " in broken and "app/broken.py was skipped" in broken
    # no code anchor: shown marked, never bare (nothing was checked, and nothing is recorded for it)
    assert "- ⟦did, 30 Nov 2026⟧ docs: the docs are online ⟦url https://example.org⟧ ⟦inconclusive (no code anchor)⟧" in lines

    checks = "SELECT count(*) FROM fact_checks WHERE agent_id = 'demo' AND wake_id = $1"
    assert await _count(st, checks, first.wake_id) == 3
    assert await _count(st, "SELECT count(*) FROM fact_checks WHERE fact_id = $1 AND status = 'refuted' AND head = $2", redis, head) == 1
    assert await _count(st, "SELECT count(*) FROM fact_checks WHERE fact_id = $1 AND status = 'verified'", sqlite) == 1
    assert await _count(st, "SELECT count(*) FROM fact_checks WHERE fact_id = $1 AND status = 'inconclusive'", skipped) == 1
    reality = "SELECT count(*) FROM retraction_ledger WHERE agent_id = 'demo' AND caught_by = 'reality'"
    assert await _count(st, reality) == 1

    second = await wakes.run(config, st, agent_id="demo", tier="whisper")
    assert "redis" not in _block(second, "provenance_facts")
    assert await _count(st, checks, second.wake_id) == 2  # refuted at this HEAD before: out, and not checked again
    assert await _count(st, reality) == 1  # the same fact at the same HEAD: the same retraction
    assert await _count(st, "SELECT count(*) FROM fact_checks WHERE fact_id = $1", redis) == 1
    async with st.pg_conn() as conn:
        assert await conn.fetchval("SELECT status FROM facts WHERE fact_id = $1", redis) == "active"  # reality keeps it active

    dry = await wakes.run(config, st, agent_id="demo", tier="whisper", dry_run=True)
    assert "1 refuted (left out)" in _block(dry, "provenance_facts")  # checked ...
    assert await _count(st, "SELECT count(*) FROM fact_checks") == 5  # ... and nothing recorded
    assert await _count(st, checks, dry.wake_id) == 0


async def test_a_moved_head_is_followed_once_its_ttl_has_passed(opened: tuple[Config, stores.Stores, str], clock: Clock) -> None:
    config, st, head = opened
    sqlite = await _fact(st, "index", "the cache's get opens sqlite3", SQLITE)
    first = await wakes.run(config, st, agent_id="demo", tier="whisper")
    assert f"⟦verified @{head[:8]}⟧" in _block(first, "provenance_facts")

    moved = gitrepo.commit(st.config.base_dir / "repo", {"app/cache.py": "import json\n\ndef get(k):\n    return json.loads(k)\n"})
    clock.t += 10  # within the 30 s TTL: HEAD is not resolved again
    within = await wakes.run(config, st, agent_id="demo", tier="whisper")
    assert f"⟦verified @{head[:8]}⟧" in _block(within, "provenance_facts")

    clock.t += 25  # 35 s after HEAD was resolved: the next read sees the new commit
    after = _block(await wakes.run(config, st, agent_id="demo", tier="whisper"), "provenance_facts")
    assert "sqlite3" not in after and f"code anchors checked at HEAD {moved[:8]}: 0 verified, 1 refuted" in after
    async with st.pg_conn() as conn:
        heads = [r["head"] for r in await conn.fetch(
            "SELECT head FROM fact_checks WHERE fact_id = $1 ORDER BY check_id", sqlite)]
    assert heads == [head, head, moved]


async def test_a_workspace_that_is_not_a_repository_leaves_facts_inconclusive(
    opened: tuple[Config, stores.Stores, str], clock: Clock, tmp_path: Path, store_config: Callable[..., Config],
) -> None:
    _, st, _ = opened
    (tmp_path / "plain").mkdir()
    config = store_config(agents=AGENT.replace('workspace = "repo"', 'workspace = "plain"'))
    await _fact(st, "index", "the cache's get opens sqlite3", SQLITE)
    text = _block(await wakes.run(config, st, agent_id="demo", tier="whisper"), "provenance_facts")
    assert "0 verified, 0 refuted (left out), 1 inconclusive" in text
    assert "⟦inconclusive: could not check: " in text and "is not a git repository" in text and "verified @" not in text


async def test_a_retraction_naming_a_fact_refutes_it_and_the_settled_block_shows_it(
    opened: tuple[Config, stores.Stores, str], clock: Clock,
) -> None:
    config, st, _ = opened
    fact = await _fact(st, "canary", "the canary left no artifacts", [])
    kept = await _fact(st, "shift", "the evening shift starts at 15:00", [])
    ctx = ledger_ctx.wake_ctx(config, st, NOW + dt.timedelta(hours=1), tier="surface")
    fields = {
        "claim_verbatim": "the canary left no artifacts", "stood_on": "a summary", "why_wrong": "a stat shows probe.txt",
        "corrected_claim": "it left probe.txt", "test_procedure": "list the artifacts",
        "expected_retraction_pass_obs": "probe.txt is there", "overturn_retraction_condition": "there is no probe.txt",
    }
    with pytest.raises(ToolInputError, match="no fact"):
        await epistemic_tools.retract.handler(ctx, fact_id=str(uuid.uuid4()), **fields)
    with pytest.raises(ToolInputError, match="fact_id must be a fact's full uuid"):
        await epistemic_tools.retract.handler(ctx, fact_id="abc", **fields)
    assert await _count(st, "SELECT count(*) FROM retraction_ledger") == 0  # refusals wrote nothing

    out = await epistemic_tools.retract.handler(ctx, fact_id=str(fact), **fields)
    assert out["fact_id"] == str(fact) and out["fact_status"] == "refuted"
    async with st.pg_conn() as conn:
        assert await conn.fetchval("SELECT status FROM facts WHERE fact_id = $1", fact) == "refuted"
        assert await conn.fetchval("SELECT status FROM facts WHERE fact_id = $1", kept) == "active"
        assert (await conn.fetchval("SELECT stood_on FROM retraction_ledger")).startswith(f"fact {fact} (canary): a summary")
    with pytest.raises(ToolInputError, match="is refuted, not active"):
        await epistemic_tools.retract.handler(ctx, fact_id=str(fact), **fields)

    outcome = await wakes.run(config, st, agent_id="demo", tier="whisper")
    settled = _block(outcome, "settled_facts")
    assert 'the canary left no artifacts -> it left probe.txt (unchecked; fact canary refuted)' in settled
    facts_text = _block(outcome, "provenance_facts")
    assert "canary" not in facts_text and "shift: the evening shift starts at 15:00" in facts_text


async def test_remember_fact_takes_typed_anchors_and_infers_from_prose_only_without_them(
    opened: tuple[Config, stores.Stores, str], clock: Clock,
) -> None:
    config, st, head = opened
    assert ledger_tools.remember_fact.parameters["properties"]["anchors"] is typed_anchors.JSON_SCHEMA
    recorded = await wakes.run(config, st, agent_id="demo", tier="whisper")  # the tools write as a recorded wake
    ctx = ledger_ctx.wake_ctx(config, st, NOW, tier="surface", wake_id=recorded.wake_id)
    typed = await ledger_tools.remember_fact.handler(ctx, key="index", value="`app/cache.py` opens sqlite3", origin="did",
                                                     anchors=SQLITE)
    prose = await ledger_tools.remember_fact.handler(ctx, key="path", value="the cache lives in `app/cache.py`", origin="did")
    plain = await ledger_tools.remember_fact.handler(ctx, key="plain", value="the team meets on Mondays", origin="did")
    async with st.pg_conn() as conn:
        stored = {r["fact_key"]: r["anchors"] for r in await conn.fetch("SELECT fact_key, anchors::text FROM facts")}
    assert stored["index"] == '[{"ref": "sqlite3", "type": "import", "where": "app.cache.get"}]'  # given anchors, no guess added
    assert stored["path"] == '[{"ref": "app/cache.py", "type": "file", "inferred": true}]'
    assert stored["plain"] == "[]"
    text = _block(await wakes.run(config, st, agent_id="demo", tier="whisper"), "provenance_facts")
    path_line = next(line for line in text.splitlines() if " path: " in line)
    assert f"⟦inconclusive @{head[:8]}: " in path_line  # an inferred anchor reports and never decides
    assert all(r["fact_id"] for r in (typed, prose, plain))
    # the write path asks for anchors: a fact stored without one is told how it will be shown
    assert "code_anchors" not in typed
    for answer in (prose, plain):
        assert "inconclusive (no code anchor)" in answer["code_anchors"] and "anchors" in answer["code_anchors"]


async def test_the_daemon_warms_each_agents_workspace_at_start(
    opened: tuple[Config, stores.Stores, str], clock: Clock, store_config: Callable[..., Config],
) -> None:
    config, _, head = opened
    ws = code_check.workspace_of(config, "demo")
    assert ws is not None and ws.status().head is None and not ws.status().building  # nothing started yet
    d = daemon.Daemon(config=config, notifier=notify.Notifier(None), handle_signals=False)
    with structlog.testing.capture_logs() as logs:
        d._warm_workspaces()
    assert [e["root"] for e in logs if e["event"] == "workspace.warming"] == [str(ws.root)]
    started = ws.status()
    assert started.building or started.head == head  # the build was started without waiting for it
    assert ws.fingerprint(timeout_s=60).head == head and ws.status().head == head
    without = store_config(agents=AGENT.replace('workspace = "repo"\n', ""))
    with structlog.testing.capture_logs() as logs:
        daemon.Daemon(config=without, notifier=notify.Notifier(None), handle_signals=False)._warm_workspaces()
    assert [e for e in logs if e["event"] == "workspace.warming"] == []


async def test_the_window_is_chosen_after_the_check_and_no_fact_is_shown_bare(
    opened: tuple[Config, stores.Stores, str], clock: Clock,
) -> None:
    config, st, head = opened
    unanchored = await _fact(st, "queue", "background jobs run on Celery", [], )
    true = [await _fact(st, f"true{i}", f"get opens sqlite3 (copy {'abc'[i]})", SQLITE) for i in range(3)]
    async with st.pg_conn() as conn, conn.transaction():  # newer than the true ones: they would take every place
        false = [(await facts.remember(conn, agent_id="demo", key=f"false{i}", value=f"the cache uses redis ({i})", origin="did",
                                       recorded_at=NOW + dt.timedelta(minutes=i + 1), anchors=REDIS)).fact_id for i in range(12)]
    first = _block(await wakes.run(config, st, agent_id="demo", tier="whisper"), "provenance_facts")
    lines = first.splitlines()
    assert lines[0].startswith("Facts (4 of 16 active")
    assert f"code anchors checked at HEAD {head[:8]}: 3 verified, 12 refuted (left out), 1 inconclusive (1 with no code anchor)" in lines[0]
    assert "redis" not in first and sum(f"⟦verified @{head[:8]}⟧" in line for line in lines) == 3
    queue = next(line for line in lines if " queue: " in line)
    assert queue.endswith("⟦inconclusive (no code anchor)⟧")  # never bare
    reality = "SELECT count(*) FROM retraction_ledger WHERE agent_id = 'demo' AND caught_by = 'reality'"
    assert await _count(st, reality) == 12
    per_fact = "SELECT count(*) FROM fact_checks WHERE fact_id = $1"
    assert await _count(st, per_fact, unanchored) == 0  # nothing was checked: nothing is recorded

    again = _block(await wakes.run(config, st, agent_id="demo", tier="whisper"), "provenance_facts")
    assert again.splitlines()[0] == lines[0] and "redis" not in again
    assert [await _count(st, per_fact, f) for f in false] == [1] * 12  # refuted at this HEAD before: not checked again
    assert [await _count(st, per_fact, t) for t in true] == [2] * 3

    moved = gitrepo.commit(st.config.base_dir / "repo", {"README.md": "unrelated\n"})
    clock.t += 31
    later = _block(await wakes.run(config, st, agent_id="demo", tier="whisper"), "provenance_facts")
    assert f"code anchors checked at HEAD {moved[:8]}: 3 verified, 12 refuted (left out)" in later
    assert [await _count(st, per_fact, f) for f in false] == [2] * 12  # a new HEAD: checked again, still refuted
    assert await _count(st, reality) == 12  # the same cause: no new retraction


async def test_a_starved_budget_keeps_every_fact_refuted_before_out_and_the_block_bounded(
    opened: tuple[Config, stores.Stores, str], clock: Clock,
) -> None:
    config, st, head = opened
    refuted = [await _fact(st, f"false{i}", f"the cache uses redis ({i})", REDIS) for i in range(11)]
    await wakes.run(config, st, agent_id="demo", tier="whisper")  # refutes them at this HEAD
    async with st.pg_conn() as conn:  # a row written before the bounds (0017 adds them NOT VALID)
        await conn.execute("ALTER TABLE facts DROP CONSTRAINT facts_anchors_bounded")
        huge = [{"type": "import", "ref": "sqlite3", "where": "app/cache.py"}] * 4000
        await conn.execute("INSERT INTO facts (agent_id, fact_key, fact_value, origin, anchors, recorded_at) "
                           "VALUES ('demo', 'huge', $1, 'did', $2::jsonb, $3)", "x" * 100_000, json.dumps(huge), NOW + dt.timedelta(hours=1))
        await conn.execute("ALTER TABLE facts ADD CONSTRAINT facts_anchors_bounded CHECK (facts_anchors_bounded(anchors)) NOT VALID")
    text = _block(await wakes.run(config, st, agent_id="demo", tier="whisper"), "provenance_facts")
    assert "redis" not in text  # every fact refuted at this HEAD before stays out, without being checked again
    assert [await _count(st, "SELECT count(*) FROM fact_checks WHERE fact_id = $1", f) for f in refuted] == [1] * 11
    assert "11 refuted (left out)" in text.splitlines()[0]
    huge_line = next(line for line in text.splitlines() if " huge: " in line)
    assert len(huge_line) <= facts.LINE_CHARS_MAX + code_check.LABEL_CHARS + 10 and "…" in huge_line and "⟦3994 more anchors⟧" in huge_line
    assert len(text) < 20_000


async def test_the_fact_tools_refuse_a_lookalike_and_name_what_no_anchor_covers(
    opened: tuple[Config, stores.Stores, str], clock: Clock,
) -> None:
    """Issue 39: `absent import sqlіte3` (a Cyrillic "і") would verify "the cache never uses
    sqlite3" and render the same; the tool refuses it in one line naming both, and writes nothing.
    A value wider than its anchors is stored, and the answer names what no anchor covers; the
    arrival marks it partly anchored, not settled."""
    config, st, head = opened
    recorded = await wakes.run(config, st, agent_id="demo", tier="whisper")
    ctx = ledger_ctx.wake_ctx(config, st, NOW, tier="surface", wake_id=recorded.wake_id)
    fake = [{"type": "absent", "anchor": {"type": "import", "ref": "sql\u0456te3", "where": "app/cache.py"}}]
    with pytest.raises(ValueError, match=r"anchors\[0\] \(import\): 'sql\u0456te3' \(U\+0456 at 3\) looks like 'sqlite3'") as refused:
        await ledger_tools.remember_fact.handler(ctx, key="nosql", value="the cache never uses sqlite3", origin="did", anchors=fake)
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match="looks like 'cache'"):
        await ledger_tools.remember_fact.handler(ctx, key="x", value="x", origin="did",
                                                 anchors=[{"type": "symbol", "ref": "app.c\u0430che.get"}])
    assert await _count(st, "SELECT count(*) FROM facts") == 0  # refusals wrote nothing
    wide = await ledger_tools.remember_fact.handler(ctx, key="get", value="`get(key, timeout)` opens sqlite3 with a 30 s timeout",
                                                    origin="did", anchors=SQLITE)
    assert wide["not_checked"].startswith("key, timeout, 30 not checked: ")
    exact = await ledger_tools.remember_fact.handler(ctx, key="get2", value="get opens sqlite3", origin="did", anchors=SQLITE)
    assert "not_checked" not in exact
    lines = _block(await wakes.run(config, st, agent_id="demo", tier="whisper"), "provenance_facts").splitlines()
    assert "1 verified, 1 partly anchored (not settled), 0 refuted" in lines[0]
    assert next(line for line in lines if " get: " in line).endswith(f"⟦partly anchored @{head[:8]} (key, timeout, 30 not checked)⟧")
    async with st.pg_conn() as conn:
        assert await conn.fetchval("SELECT count(*) FROM fact_checks WHERE status = 'partly'") == 1
