"""Operator controls over real PostgreSQL and Redis, the scripted model server and a loopback
webhook receiver: instructions, "nothing to report", the pre-check, pauses, grace windows,
one-shot wakes and the delivery outbox. Each claimed slot or one-shot leaves exactly one row."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from ledgers import controls, daybook, outbox, slots
from ledgers.vocab import Status, StopReason, Trigger
from tests.support import agents, daemons, sessions, wakes
from tests.support.openai_server import ScriptedServer, completion
from tests.support.webhook_receiver import Receiver
from wake import stores
from wake.config import Config
from wake.context import WakeRequest
from wake.daemon import jobs
from wake.daemon import outbox as sender_mod
from wake.run import claim, session

SECRET = "hook-secret-value"


def _agents(tier_keys: str = "", *, model: bool = True, surface_keys: str = "") -> str:
    route = 'model = "scripted"\n' if model else ""
    return f"""
[agents.demo]
timezone = "Europe/Stockholm"
persona_files = ["persona.md"]

[agents.demo.tiers.whisper]
every = "15m"
binds = ["wake.whisper"]
{route}{tier_keys}

[agents.demo.tiers.surface]
every = "1h"
binds = ["wake.whisper", "wake.surface"]
{route}{surface_keys}
"""


def _extra(server: ScriptedServer, more: str = "") -> str:
    return f"""
[models.scripted]
base_url = "{server.url}"
model = "scripted-1"
timeout_s = 5
max_retries = 0
input_usd_per_mtok = 1.0
{more}
"""


@pytest.fixture
def make(store_config: Callable[..., Config], server: ScriptedServer) -> Callable[..., Config]:
    def build(tier_keys: str = "", *, more: str = "", model: bool = True, surface_keys: str = "", **environ: str) -> Config:
        return store_config(_extra(server, more), agents=_agents(tier_keys, model=model, surface_keys=surface_keys), **environ)

    return build


async def _wake(config: Config, tier: str = "whisper", **kw: Any) -> Any:
    async with sessions.ready_stores(config) as st:
        return await wakes.run(config, st, agent_id="demo", tier=tier, **kw)


async def _fetch(config: Config, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        return [dict(r) for r in await conn.fetch(sql, *args)]


# -- the vocabulary in the live schema -------------------------------------------------------------


async def test_the_live_constraints_accept_exactly_the_vocabulary(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        defs = [r["d"] for r in await conn.fetch(
            "SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conrelid = 'wake_introspection_ledger'::regclass AND contype = 'c'"
        )]
    finally:
        await conn.close()
    status = [d for d in defs if d.startswith("CHECK ((status = ANY")]
    trigger = [d for d in defs if d.startswith("CHECK ((trigger = ANY")]
    assert len(status) == 1 and len(trigger) == 1, defs  # 0001's unnamed ones were replaced, not kept beside
    assert {s.value for s in Status} == set(re.findall(r"'([a-z_]+)'::text", status[0]))
    assert {t.value for t in Trigger} == set(re.findall(r"'([a-z_]+)'::text", trigger[0]))
    assert any("manifest_root IS NOT NULL" in d and "'missed'" in d for d in defs)


# -- 1. instructions per tier ----------------------------------------------------------------------


async def test_instructions_are_a_hashed_block_and_an_edit_shows_in_the_next_diff(make: Callable[..., Config], tmp_path: Path) -> None:
    (tmp_path / "checklist.md").write_text("# Whisper checklist\n- look at the inbox\n- say if anything is due\n")
    config = make('instructions_file = "checklist.md"\n', model=False)
    first = await _wake(config)
    block = next(b for b in first.blocks if b.name == "instructions")
    assert block.retrieval == "ok" and block.cache_tier.name == "stable" and "look at the inbox" in block.text and block.rows == 3
    assert "instructions" in first.manifest.blocks and "## instructions\n# Whisper checklist" in first.prompt
    (tmp_path / "checklist.md").write_text("# Whisper checklist\n- look at the inbox\n")
    second = await _wake(config)
    assert second.manifest.blocks["instructions"] != first.manifest.blocks["instructions"]
    assert "instructions" in second.diff.tier.blocks.changed
    third = await _wake(config)
    assert "instructions" in third.diff.tier.blocks.unchanged


async def test_a_missing_instructions_file_is_a_failed_block_and_the_wake_runs(make: Callable[..., Config]) -> None:
    config = make('instructions_file = "nowhere.md"\ninstructions_cache_tier = "static"\n', model=False)
    o = await _wake(config)
    block = next(b for b in o.blocks if b.name == "instructions")
    assert o.status == "completed" and block.retrieval == "failed" and block.result == "unknown"
    assert block.cache_tier.name == "static" and "nowhere.md does not exist" in (block.reason or "")
    assert block.text.startswith("could not check: ")


# -- 2. nothing to report --------------------------------------------------------------------------


async def test_the_ok_token_alone_settles_quiet_with_its_tokens_and_no_daybook_or_delivery(
    make: Callable[..., Config], server: ScriptedServer, tmp_path: Path,
) -> None:
    more = f'[delivery.log]\nkind = "file"\npath = "{tmp_path / "deliveries.jsonl"}"\n'
    config = make('ok_token = "NOTHING_TO_REPORT"\ndeliver_to = ["log"]\n', more=more)
    server.push(completion("  NOTHING_TO_REPORT\n"))
    o = await _wake(config)
    assert o.status == "quiet" and o.note == "nothing to report (NOTHING_TO_REPORT)" and len(server.requests) == 1
    row = (await _fetch(config, "SELECT * FROM wake_introspection_ledger WHERE wake_id = $1", o.wake_id))[0]
    assert row["status"] == "quiet" and row["stop_reason"] == StopReason.nothing_to_report and row["prompt_tokens"] > 0
    assert row["final_text"] is None
    assert await _fetch(config, "SELECT * FROM daybook") == [] and await _fetch(config, "SELECT * FROM wake_outbox") == []


async def test_the_ok_token_among_other_text_is_an_answer(make: Callable[..., Config], server: ScriptedServer) -> None:
    config = make('ok_token = "NOTHING_TO_REPORT"\n')
    server.push(completion("The build broke at 09:12. Otherwise NOTHING_TO_REPORT."))
    o = await _wake(config)
    assert o.status == "completed" and o.thinking.stop_reason == "done"
    async with stores.connected(config) as st, st.pg_conn() as conn:
        entries, total = await daybook.recent(conn, "demo", limit=5)
    assert total == 1 and "build broke" in entries[0].entry


async def test_a_gate_quiet_row_and_an_ok_token_quiet_row_differ(make: Callable[..., Config], server: ScriptedServer) -> None:
    config = make('ok_token = "OK"\n')
    server.push(completion("OK"))
    thought = await _wake(config)
    gated = await _wake(config)  # nothing changed since: the gate ends it without a call
    assert (thought.status, gated.status) == ("quiet", "quiet") and len(server.requests) == 1
    rows = {r["wake_id"]: r for r in await _fetch(config, "SELECT wake_id, stop_reason, prompt_tokens, note FROM wake_introspection_ledger")}
    assert (rows[thought.wake_id]["stop_reason"], rows[gated.wake_id]["stop_reason"]) == ("nothing_to_report", "gate")
    assert rows[thought.wake_id]["prompt_tokens"] > 0 and rows[gated.wake_id]["prompt_tokens"] == 0


# -- 5. the pre-check ------------------------------------------------------------------------------


def _script(tmp_path: Path, name: str, body: str, *, executable: bool = True) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def test_precheck_exit_0_thinks_with_its_stdout_as_a_block(make: Callable[..., Config], server: ScriptedServer, tmp_path: Path) -> None:
    script = _script(tmp_path, "check.sh", 'echo "3 new tickets: $1"; exit 0')
    config = make(f'precheck = ["{script}", "queue-a"]\n')
    o = await _wake(config)
    block = next(b for b in o.blocks if b.name == "precheck")
    assert o.status == "completed" and block.result == "present" and block.text == "3 new tickets: queue-a"
    assert len(server.requests) == 1 and "3 new tickets: queue-a" in server.requests[0].raw.decode()


async def test_precheck_exit_1_is_quiet_without_a_model_call(make: Callable[..., Config], server: ScriptedServer, tmp_path: Path) -> None:
    config = make(f'precheck = ["{_script(tmp_path, "idle.sh", "exit 1")}"]\n')
    o = await _wake(config)
    assert o.status == "quiet" and server.requests == [] and o.note == "pre-check: nothing to do (exit 1)"
    row = (await _fetch(config, "SELECT stop_reason, prompt_tokens, manifest_root FROM wake_introspection_ledger"))[0]
    assert row["stop_reason"] == "precheck" and row["prompt_tokens"] == 0 and row["manifest_root"] is not None


@pytest.mark.parametrize(
    ("body", "executable", "timeout", "says"),
    [
        ("echo broken; exit 3", True, 5, "exited 3: broken"),
        ("sleep 30", True, 0.3, "timed out after 0.3s and was killed"),
        ("exit 0", False, 5, "could not run: Permission denied"),
    ],
    ids=["exit_3", "timeout", "not_executable"],
)
async def test_precheck_any_other_end_fails_the_wake_with_the_reason(
    make: Callable[..., Config], server: ScriptedServer, tmp_path: Path, body: str, executable: bool, timeout: float, says: str,
) -> None:
    script = _script(tmp_path, "bad.sh", body, executable=executable)
    config = make(f'precheck = ["{script}"]\nprecheck_timeout_s = {timeout}\n')
    o = await _wake(config)
    assert o.status == "failed" and server.requests == [] and says in (o.error or ""), o.error
    row = (await _fetch(config, "SELECT status, error FROM wake_introspection_ledger"))[0]
    assert row["status"] == "failed" and says in row["error"]


# -- 6 and 4. pauses, grace windows, one-shots: all through the one claim path --------------------------


def _session(config: Config, st: stores.Stores) -> session.Session:
    return session.Session(config=config, stores=st, registry=session.build_registry(config), models=None)


async def _rows(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in await conn.fetch("SELECT wake_id, status, note, trigger, scheduled_for FROM wake_introspection_ledger")]


async def test_a_paused_slot_gets_one_skipped_row_naming_who_paused_it(make: Callable[..., Config]) -> None:
    config = make(model=False)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    async with sessions.ready_stores(config) as st:
        s = _session(config, st)
        async with st.pg_conn() as conn:
            await controls.pause(conn, agent_id="demo", tier="whisper", paused_by="alice", paused_at=now, until=None, reason="migrating")
        slot = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=now)
        ran = await claim.run(s, slot, owner="t", claim=claim.Claim(by="r1"))
        again = await claim.run(s, slot, owner="t", claim=claim.Claim(by="r2"))  # the slot, claimed once
        surface = await claim.run(s, WakeRequest(agent_id="demo", tier="surface", trigger=Trigger.schedule, scheduled_for=now),
                                  owner="t", claim=claim.Claim(by="r1"))
        async with st.pg_conn() as conn:
            rows = await _rows(conn)
            lifted = await controls.resume(conn, "demo", None)
        after = await claim.run(s, WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule,
                                               scheduled_for=now + dt.timedelta(minutes=15)), owner="t", claim=claim.Claim(by="r1"))
    assert ran is None and again is None and surface is not None and surface.status == "completed"
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert len(skipped) == 1 and skipped[0]["note"] == "skipped: paused: by alice (migrating)"
    assert len(rows) == 2 and [p.paused_by for p in lifted] == ["alice"]
    assert after is not None and after.status == "completed"


async def test_an_agent_wide_pause_until_a_time_ends_by_itself(make: Callable[..., Config]) -> None:
    config = make(model=False)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    async with sessions.ready_stores(config) as st:
        s = _session(config, st)
        async with st.pg_conn() as conn:
            await controls.pause(conn, agent_id="demo", tier=None, paused_by="bob", paused_at=now, until=now + dt.timedelta(hours=1), reason=None)
        inside = await claim.held_back(s, WakeRequest(agent_id="demo", tier="surface", trigger=Trigger.schedule, scheduled_for=now), now)
        later = now + dt.timedelta(hours=2)
        outside = await claim.held_back(s, WakeRequest(agent_id="demo", tier="surface", trigger=Trigger.schedule, scheduled_for=later), later)
    assert inside == (Status.skipped, f"paused: by bob until {(now + dt.timedelta(hours=1)).isoformat()}") and outside is None


async def test_a_slot_later_than_its_grace_is_one_missed_row_and_no_wake(make: Callable[..., Config]) -> None:
    config = make("misfire_grace_s = 60\n", model=False)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    late_slot = now - dt.timedelta(minutes=10)
    async with sessions.ready_stores(config) as st:
        s = _session(config, st)
        late = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=late_slot)
        missed = await claim.run(s, late, owner="t", claim=claim.Claim(by="r1"), now=lambda: now)
        twice = await claim.run(s, late, owner="t", claim=claim.Claim(by="r2"), now=lambda: now)
        recent = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=now - dt.timedelta(seconds=30))
        in_time = await claim.run(s, recent, owner="t", claim=claim.Claim(by="r1"), now=lambda: now)
        # without the key, a slot runs however late (the behaviour before grace windows existed)
        hours_ago = WakeRequest(agent_id="demo", tier="surface", trigger=Trigger.schedule, scheduled_for=now - dt.timedelta(hours=5))
        old = await claim.run(s, hours_ago, owner="t", claim=claim.Claim(by="r1"), now=lambda: now)
        # a catch-up is old on purpose: its own rule decides, grace does not apply
        catch_up = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.catch_up, scheduled_for=now - dt.timedelta(hours=3))
        caught = await claim.run(s, catch_up, owner="t", claim=claim.Claim(by="r1"), now=lambda: now)
        async with st.pg_conn() as conn:
            rows = await _rows(conn)
    assert missed is None and twice is None
    assert in_time is not None and in_time.status == "completed" and old is not None and old.status == "completed"
    assert caught is not None and caught.status == "completed"
    lost = [r for r in rows if r["scheduled_for"] == late_slot]
    assert len(lost) == 1 and lost[0]["status"] == "missed"
    assert lost[0]["note"] == "missed: 600.0s late, past the tier's misfire_grace_s of 60s"
    assert len(rows) == 4


async def test_a_one_shot_fires_once_across_concurrent_claimers_and_a_cancelled_one_never(make: Callable[..., Config]) -> None:
    config = make(model=False)
    now = dt.datetime.now(dt.UTC)
    shot, cancelled = uuid.uuid4(), uuid.uuid4()
    async with sessions.ready_stores(config) as st:
        s = _session(config, st)
        async with st.pg_conn() as conn:
            for wake_id in (shot, cancelled):
                await controls.add_oneshot(conn, wake_id=wake_id, agent_id="demo", tier="surface", fire_at=now, note="deploy check",
                                           created_by="carol", created_at=now)
            assert await controls.cancel_oneshot(conn, cancelled, "carol", now)
            due = await controls.due_oneshots(conn, now + dt.timedelta(seconds=1))

        async def claimer(wake_id: uuid.UUID, by: str) -> Any:
            request = WakeRequest(agent_id="demo", tier="surface", trigger=Trigger.at, wake_id=wake_id)
            return await claim.run(s, request, owner=by, claim=claim.Claim(by=by), wait_s=30)

        outcomes = await asyncio.gather(*(claimer(shot, f"r{i}") for i in range(4)), claimer(cancelled, "r9"))
        async with st.pg_conn() as conn:
            rows = await _rows(conn)
            listed = await controls.oneshots(conn, include_done=True)
            pending = await controls.oneshots(conn)
    assert [d.wake_id for d in due] == [shot]
    ran = [o for o in outcomes if o is not None]
    assert len(ran) == 1 and ran[0].wake_id == shot and ran[0].trigger == "at" and ran[0].status == "completed"
    assert [(r["wake_id"], r["trigger"], r["status"]) for r in rows] == [(shot, "at", "completed")]
    assert {r.wake_id: r.status for r in listed} == {shot: "completed", cancelled: None} and pending == []


# -- 3. delivery through the outbox ------------------------------------------------------------------


def _hook(receiver: Receiver, *, attempts: int = 3, backoff: float = 0.01) -> str:
    return (
        f'[delivery.hook]\nkind = "webhook"\nurl = "{receiver.url}"\nsecret_credential = "hook_secret"\ntimeout_s = 5\n'
        f"max_attempts = {attempts}\nbackoff_s = {backoff}\nbackoff_max_s = 0.05\n"
    )


async def test_a_completed_wake_queues_in_its_settle_and_the_sender_delivers_signed_once(
    make: Callable[..., Config], server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    with Receiver(secret=SECRET) as receiver:
        more = _hook(receiver) + f'[delivery.log]\nkind = "file"\npath = "{tmp_path / "out.jsonl"}"\n'
        config = make('deliver_to = ["hook", "log"]\n', more=more)
        server.push(completion("Two tickets need an answer today."))
        o = await _wake(config)
        queued = await _fetch(config, "SELECT route, state, attempts, payload FROM wake_outbox ORDER BY route")
        async with stores.connected(config) as st:
            sender = sender_mod.Sender(lambda: config, st, owner="test-sender")
            taken = await sender.deliver_due()
            again = await sender.deliver_due()
            await sender._http.aclose()
    assert o.status == "completed"
    assert [(q["route"], q["state"], q["attempts"]) for q in queued] == [("hook", "pending", 0), ("log", "pending", 0)]
    assert json.loads(queued[0]["payload"])["text"] == "Two tickets need an answer today."
    assert (taken, again) == (2, 0)
    assert len(receiver.requests) == 1 and receiver.requests[0].signature_ok is True
    assert receiver.acted_on == [str(o.wake_id)] and receiver.requests[0].json["wake_id"] == str(o.wake_id)
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["text"] == "Two tickets need an answer today."
    done = await _fetch(config, "SELECT state, attempts, sent_at FROM wake_outbox")
    assert all(d["state"] == "sent" and d["attempts"] == 1 and d["sent_at"] is not None for d in done)
    assert sender.backlog == 0


async def test_retries_back_off_then_dead_letter_then_retry_delivers(
    make: Callable[..., Config], server: ScriptedServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    with Receiver(secret=SECRET, fail_first=3) as receiver:
        config = make('deliver_to = ["hook"]\n', more=_hook(receiver, attempts=3))
        server.push(completion("A report."))
        o = await _wake(config)
        async with stores.connected(config) as st:
            sender = sender_mod.Sender(lambda: config, st, owner="test-sender")
            await sender.deliver_due()
            dead = (await _fetch(config, "SELECT id, state, attempts, last_error FROM wake_outbox"))[0]
            async with st.pg_conn() as conn:
                listed = await outbox.listing(conn, dead_only=True)
                assert await outbox.retry(conn, dead["id"], dt.datetime.now(dt.UTC))
            await sender.deliver_due()
            await sender._http.aclose()
    assert (dead["state"], dead["attempts"]) == ("dead", 3) and "HTTP 500" in dead["last_error"]
    assert [r.id for r in listed] == [dead["id"]]
    after = (await _fetch(config, "SELECT state, attempts FROM wake_outbox"))[0]
    assert (after["state"], after["attempts"]) == ("sent", 1) and len(receiver.requests) == 4
    assert receiver.acted_on == [str(o.wake_id)]
    assert {r.headers["idempotency-key"] for r in receiver.requests} == {str(o.wake_id)}


async def test_a_stale_fence_settle_queues_nothing(make: Callable[..., Config], server: ScriptedServer, tmp_path: Path) -> None:
    """The outbox row is part of the fenced settle: a wake whose fence is stale delivers nothing."""
    more = f'[delivery.log]\nkind = "file"\npath = "{tmp_path / "out.jsonl"}"\n'
    config = make('deliver_to = ["log"]\n', more=more)
    server.push(completion("Should never be delivered."))
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            await conn.execute("INSERT INTO agent_fences (agent_id, fence) VALUES ('demo', 100) ON CONFLICT (agent_id) DO UPDATE SET fence = 100")
        o = await wakes.run(config, st, agent_id="demo", tier="whisper", fence=5)
    assert o.recorded is False
    assert await _fetch(config, "SELECT * FROM wake_outbox") == []


def test_a_file_route_needs_its_path_and_a_webhook_its_url(store_config: Callable[..., Config]) -> None:
    from wake.errors import ConfigError

    with pytest.raises(ConfigError, match="a webhook route needs url"):
        store_config('[delivery.x]\nkind = "webhook"\n')
    with pytest.raises(ConfigError, match=r"agents\.demo\.tiers\.whisper\.deliver_to\.0: unknown delivery route 'nope'"):
        store_config("", agents=_agents('deliver_to = ["nope"]\n', model=False))
    assert os.environ.get("HOOK_SECRET") is None


# -- 4. grace windows and the catch-up at start ----------------------------------------------------------

GRACE_AGENTS = agents.toml(tiers={
    "whisper": 'every = "15m"\nbinds = ["wake.whisper"]\nmisfire_grace_s = 60',
    "surface": 'every = "1h"\nbinds = ["wake.surface"]\nmisfire_grace_s = 60',
    "full": 'cron = "0 * * * *"\nbinds = ["wake"]\ncatch_up = "skip"\nmisfire_grace_s = 1800',
}, timezone="UTC")


async def test_at_start_grace_decides_for_a_skip_policy_and_a_catch_up_runs_however_late(store_config: Callable[..., Config]) -> None:

    config = store_config("[daemon]\nlease_ttl_s = 5\nbusy_wait_s = 1\n", agents=GRACE_AGENTS)
    now = dt.datetime.now(dt.UTC).replace(minute=20, second=0, microsecond=0)
    if now > dt.datetime.now(dt.UTC):
        now -= dt.timedelta(hours=1)
    long_ago = now.replace(minute=0) - dt.timedelta(hours=3)
    async with sessions.ready_stores(config) as st:
        d = daemons.in_process(_session(config, st), now=lambda: now)
        async with st.pg_conn() as conn:
            for tier in ("whisper", "surface", "full"):
                await slots.claim(
                    conn, agent_id="demo", tier=tier, scheduled_for=long_ago, trigger="schedule", claimed_by="old", claimed_at=long_ago,
                    wake_id=uuid.uuid4(),
                )
        await jobs.catch_up_all(d)
        await asyncio.gather(*list(d.tasks))
        async with st.pg_conn() as conn:
            rows = await conn.fetch("SELECT tier, trigger, scheduled_for, status, note FROM wake_introspection_ledger ORDER BY tier")
    got = [(r["tier"], r["trigger"], r["scheduled_for"], r["status"]) for r in rows]
    assert got == [
        ("full", "schedule", now.replace(minute=0), "completed"),  # 20 minutes late, within its 30: it runs
        ("surface", "catch_up", now.replace(minute=0), "completed"),  # catch_up = "one": its own rule, however late
        ("whisper", "schedule", now.replace(minute=15), "missed"),  # 5 minutes late, past its 60 s: one row, no wake
    ]
    assert rows[2]["note"] == "missed: 300.0s late, past the tier's misfire_grace_s of 60s"


async def test_the_daemon_wires_the_outbox_backlog_gauge_to_its_sender(store_config: Callable[..., Config]) -> None:
    from wake.observe import metrics

    config = store_config('[metrics]\nlisten = "127.0.0.1:0"\n', agents=_agents(model=False))
    async with stores.connected(config) as st:
        d = daemons.in_process(_session(config, st))
        exposition = d._serve_metrics()
        try:
            assert d.metrics is not None and exposition is not None
            d.sender.backlog = 3.0
            assert d.metrics.registry.get_sample_value("wake_outbox_backlog") == 3.0
            d.sender.backlog = 0.0
            assert d.metrics.registry.get_sample_value("wake_outbox_backlog") == 0.0
        finally:
            if exposition is not None:
                exposition.close()
            metrics.install(None)
            await d.sender._http.aclose()


async def test_the_slot_claim_reads_the_same_pause_as_pause_for(make: Callable[..., Config]) -> None:
    # The claim reads the pause in its own round trip (ledgers/sql/slots.sql); it must hold the
    # slot back exactly when `controls.pause_for` (what `wake status` shows) says it is paused.
    config = make(model=False)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    hour = dt.timedelta(hours=1)
    cases = [  # (the pauses in force, the tier claimed, who holds it back)
        ([], "whisper", None),
        ([("whisper", "ann", None)], "whisper", "ann"),
        ([("whisper", "ann", None)], "surface", None),
        ([(None, "bob", now + hour)], "surface", "bob"),
        ([(None, "bob", now - hour)], "surface", None),  # ended by itself
        ([(None, "bob", None), ("surface", "cy", now + hour)], "surface", "cy"),  # the tier's own first
        ([(None, "bob", None), ("surface", "cy", now - hour)], "surface", "bob"),
    ]
    async with sessions.ready_stores(config) as st:
        for n, (pauses, tier, held_by) in enumerate(cases):
            async with st.pg_conn() as conn:
                await controls.resume(conn, "demo", None)
                for paused_tier, who, until in pauses:
                    await controls.pause(conn, agent_id="demo", tier=paused_tier, paused_by=who, paused_at=now - 2 * hour, until=until, reason=None)
                read = await controls.pause_for(conn, "demo", tier, now)
                got = await slots.claim_reading_fence(
                    conn, agent_id="demo", tier=tier, scheduled_for=now + dt.timedelta(minutes=n), trigger=Trigger.schedule, claimed_by="t",
                    claimed_at=now, wake_id=uuid.uuid4(),
                )
            assert got.won
            assert (read.paused_by if read else None) == held_by, (n, read)
            assert (got.pause.paused_by if got.pause else None) == held_by, (n, got.pause)
            assert got.pause is None or (got.pause.until, got.pause.reason) == (read.until, read.reason)
