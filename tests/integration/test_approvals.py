"""Approvals for unattended actions (docs/approvals.md) over real PostgreSQL, Redis, the scripted
OpenAI-compatible server on loopback and the `wake` CLI as a process: a call of a tool that
requires approval is queued, decided once, and run by the agent's next wake under its fence."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from ledgers import actions, approvals, fences
from tests.support import approval_tools, cli_fork, marked, sessions, wakes
from tests.support.openai_server import ScriptedServer, completion
from wake import stores
from wake.config import Config
from wake.errors import ConfigError
from wake.run import cycle, session

REPO = Path(__file__).resolve().parents[2]
TOOLS = '[tools]\nmodules = ["tests.support.approval_tools"]\nrequires_approval = ["restart"]\n'


def _config(store_config: Callable[..., Config], server: ScriptedServer, tools: str = TOOLS, surface_binds: str = '["wake"]') -> Config:
    extra = f"""{tools}
[models.scripted]
base_url = "{server.url}"
model = "scripted-1"
timeout_s = 5
max_retries = 0
"""
    agents = f"""
[agents.demo]
timezone = "UTC"
[agents.demo.tiers.whisper]
binds = ["wake.whisper"]
[agents.demo.tiers.surface]
binds = {surface_binds}
model = "scripted"
"""
    return store_config(extra, agents=agents)


async def _wake(config: Config, fence: int, tier: str = "surface") -> cycle.WakeOutcome:
    """One wake under `fence`, recorded as the agent's newest first (as the lease does)."""
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            await fences.advance(conn, "demo", fence)
        return await wakes.run(config, st, session.build_registry(config), agent_id="demo", tier=tier, fence=fence)


async def _rows(config: Config) -> list[approvals.Approval]:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        return await approvals.listed(conn, agent_id="demo", include_closed=True, limit=50)


def _cli(config: Config, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "XDG_")) and k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(PYTHONPATH=str(REPO), WAKE_ENGINES__IDLE_S="0")
    return cli_fork.run([sys.executable, "-m", "wake", "--config", str(config.path), *args], capture_output=True, text=True, env=env,
                          timeout=240, cwd=REPO)


def _block(o: cycle.WakeOutcome) -> Any:
    return next(b for b in o.blocks if b.name == "approvals")


def _answers(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(marked.plain(m["content"])) if marked.plain(m["content"]).startswith("{") else {"text": marked.plain(m["content"])}
            for m in body["messages"] if m["role"] == "tool"]


def _one_line(done: subprocess.CompletedProcess[str], status: int, needle: str) -> None:
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.stderr


async def test_a_queued_call_is_decided_once_and_run_by_the_next_wake_under_its_fence(
    store_config: Callable[..., Config], server: ScriptedServer,
) -> None:
    config = _config(store_config, server)
    server.push(
        completion("The cache is stale, so I restart it.", [("deploy", {"target": "prod", "reason": "release 1.2 passed its checks"}),
                                                           ("restart", {"service": "cache"}), ("status", {})]),
        completion(None, [("deploy", {"reason": "release 1.2 passed its checks", "target": "prod"})]),
        completion("Asked for a deploy and a restart."),
    )
    first = await _wake(config, fence=1)
    assert first.status == "completed", first.error
    assert [c["tool"] for c in approval_tools.CALLS] == ["status"]  # neither call that needs approval ran
    answers = _answers(server.requests[1].json)
    assert [a.get("status") for a in answers[:2]] == ["queued for approval"] * 2
    again = _answers(server.requests[2].json)[-1]
    assert again["approval"] == answers[0]["approval"] and "not queued twice" in again["detail"]  # the same call waits once
    rows = {r.tool: r for r in await _rows(config)}
    assert set(rows) == {"deploy", "restart"} and all(r.state == "pending" and r.wake_id == first.wake_id for r in rows.values())
    assert (rows["deploy"].reason, rows["deploy"].reason_from) == ("release 1.2 passed its checks", "arguments")
    assert (rows["restart"].reason, rows["restart"].reason_from) == ("The cache is stale, so I restart it.", "assistant")
    assert rows["deploy"].arguments == {"target": "prod", "reason": "release 1.2 passed its checks"}
    async with stores.connected(config) as st, st.pg_conn() as conn:
        outcomes = [(r["tool"], r["outcome"]) for r in await conn.fetch(
            "SELECT tool, outcome FROM wake_tool_calls WHERE wake_id = $1 ORDER BY seq", first.wake_id)]
    assert outcomes == [("deploy", "queued"), ("restart", "queued"), ("status", "ok"), ("deploy", "queued")]

    listed = _cli(config, "approvals", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(a["tool"] for a in json.loads(listed.stdout)) == ["deploy", "restart"]
    text = _cli(config, "approvals")
    assert text.returncode == 0 and f"approval {rows['deploy'].id}" in text.stdout and "release 1.2" in text.stdout
    deploy_id, restart_id = str(rows["deploy"].id), str(rows["restart"].id)
    _one_line(_cli(config, "approvals", "approve", "twelve", "--by", "alice"), 65, "expected an approval id")
    _one_line(_cli(config, "approvals", "approve", "999999", "--by", "alice"), 1, "no approval 999999")
    _one_line(_cli(config, "approvals", "approve", deploy_id, "--by", "   "), 65, "--by must name who decides")
    ok = _cli(config, "approvals", "approve", deploy_id, "--by", "alice")
    assert ok.returncode == 0 and "approved approval" in ok.stdout, ok.stderr
    _one_line(_cli(config, "approvals", "reject", deploy_id, "--by", "bob"), 65, "already approved by alice")
    no = _cli(config, "approvals", "reject", restart_id, "--by", "bob", "--why", "not during business hours")
    assert no.returncode == 0, no.stderr
    decided = {r.tool: r for r in await _rows(config)}
    assert (decided["deploy"].state, decided["deploy"].decided_by) == ("approved", "alice")  # the refused second decision changed nothing
    assert (decided["restart"].state, decided["restart"].why) == ("rejected", "not during business hours")

    server.push(completion("Saw the deploy ran."))
    second = await _wake(config, fence=2)
    assert second.status == "completed", second.error
    ran = [c for c in approval_tools.CALLS if c["tool"] == "deploy"]
    assert ran == [{"tool": "deploy", "target": "prod", "wake_id": second.wake_id, "fence": 2}]  # once, in wake 2, under its fence
    assert not [c for c in approval_tools.CALLS if c["tool"] == "restart"]
    block = _block(second)
    assert block.retrieval == "ok" and "ran in this wake: ok" in block.text and '{"deployed": "prod"}' in block.text
    assert "rejected by bob" in marked.plain(block.text) and "not during business hours" in block.text
    sent = json.dumps(server.requests[-1].json["messages"])
    assert "ran in this wake: ok" in sent  # the model read the result in its arrival
    done = {r.tool: r for r in await _rows(config)}["deploy"]
    assert (done.state, done.outcome, done.run_wake_id, done.run_fence) == ("ran", "ok", second.wake_id, 2)
    async with stores.connected(config) as st, st.pg_conn() as conn:
        acted, _ = await actions.since(conn, "demo", dt.datetime(2000, 1, 1, tzinfo=dt.UTC), limit=10)
    assert [(a.tool, a.wake_id) for a in acted] == [("deploy", second.wake_id)]

    server.push(completion("Nothing new."))
    third = await _wake(config, fence=3)
    assert len([c for c in approval_tools.CALLS if c["tool"] == "deploy"]) == 1  # never twice
    assert "deploy" not in _block(third).text


async def test_an_approved_call_whose_tool_is_no_longer_bound_or_changed_is_not_run(
    store_config: Callable[..., Config], server: ScriptedServer,
) -> None:
    config = _config(store_config, server)
    registry = session.build_registry(config)
    deploy = registry.get("deploy")
    from wake.witness import manifest

    at = dt.datetime.now(dt.UTC)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            changed = await approvals.queue(
                conn, agent_id="demo", wake_id=uuid.uuid4(), tier="surface", turn=1, call_id="c1", tool="deploy", tool_hash="0" * 64,
                arguments={"target": "a"}, reason="r", reason_from="arguments", at=at,
            )
            unbound = await approvals.queue(
                conn, agent_id="demo", wake_id=uuid.uuid4(), tier="surface", turn=1, call_id="c2", tool="deploy",
                tool_hash=manifest.tool_hash(deploy), arguments={"target": "b"}, reason="r", reason_from="arguments", at=at,
            )
            for q in (changed, unbound):
                assert await approvals.decide(conn, q.id, "approved", by="alice", at=at, why=None, ttl_s=86400) is not None
            assert await approvals.decide(conn, changed.id, "rejected", by="bob", at=at, why=None, ttl_s=86400) is None  # once
    first = await _wake(config, fence=1)  # deploy is bound: the changed declaration is not run, the other one is
    states = {r.id: r for r in await _rows(config)}
    assert states[changed.id].state == "not_run" and "declaration changed" in (states[changed.id].result or "")
    assert states[unbound.id].state == "ran"
    assert "declaration changed" in _block(first).text

    async with stores.connected(config) as st, st.pg_conn() as conn:
        again = await approvals.queue(
            conn, agent_id="demo", wake_id=uuid.uuid4(), tier="surface", turn=1, call_id="c3", tool="deploy",
            tool_hash=manifest.tool_hash(deploy), arguments={"target": "c"}, reason="r", reason_from="arguments", at=at,
        )
        await approvals.decide(conn, again.id, "approved", by="alice", at=at, why=None, ttl_s=86400)
    whisper = await _wake(config, fence=2, tier="whisper")  # a whisper does not hold deploy and did not ask: it waits
    assert "runs at your next wake that holds deploy" in _block(whisper).text
    narrowed = _config(store_config, server, surface_binds='["wake.whisper"]')
    later = await _wake(narrowed, fence=3)  # the asking tier no longer binds it: not run, and said so
    row = {r.id: r for r in await _rows(config)}[again.id]
    assert row.state == "not_run" and "not bound" in (row.result or "") and "not bound" in _block(later).text
    assert [c["target"] for c in approval_tools.CALLS if c["tool"] == "deploy"] == ["b"]


async def test_two_claimants_race_and_the_call_is_claimed_once(store_config: Callable[..., Config], server: ScriptedServer, pg_dsn: str) -> None:
    config = _config(store_config, server)
    at = dt.datetime.now(dt.UTC)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            q = await approvals.queue(
                conn, agent_id="demo", wake_id=uuid.uuid4(), tier="surface", turn=1, call_id="c", tool="deploy", tool_hash="h",
                arguments={"target": "x"}, reason="", reason_from="none", at=at,
            )
            await approvals.decide(conn, q.id, "approved", by="alice", at=at, why=None, ttl_s=86400)
    conns = [await asyncpg.connect(pg_dsn) for _ in range(2)]
    try:
        async def claim(conn: asyncpg.Connection, fence: int) -> list[approvals.Claimed]:
            async with conn.transaction():
                return await approvals.claim(conn, agent_id="demo", wake_id=uuid.uuid4(), tier="surface", fence=fence, at=at, bound=["deploy"])

        got = await asyncio.gather(claim(conns[0], 5), claim(conns[1], 5))
        assert sorted(len(g) for g in got) == [0, 1]  # whichever won, once
        # a call left running by a wake of an older fence is interrupted by the next claim, never run again
        later = await claim(conns[0], 6)
        assert later == []
        row = await approvals.one(conns[0], q.id)
        assert row is not None and row.state == "interrupted" and "not run again" in (row.result or "")
    finally:
        for c in conns:
            await c.close()


async def test_a_requires_approval_rule_that_matches_no_tool_stops_start_up(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = _config(store_config, server, tools='[tools]\nmodules = ["tests.support.approval_tools"]\nrequires_approval = ["deplyo"]\n')
    with pytest.raises(ConfigError, match="'deplyo' matches no tool"):
        session.build_registry(config)
    marked = _config(store_config, server, tools='[tools]\nmodules = ["tests.support.approval_tools"]\nrequires_approval = ["stat*"]\n')
    registry = session.build_registry(marked)
    assert registry.get("status").requires_approval and registry.get("deploy").requires_approval
    assert not registry.get("restart").requires_approval
    assert registry.get("status").declaration() == approval_tools.status.declaration()  # the policy is not the declaration


async def test_a_call_pending_past_its_ttl_expires_never_runs_and_says_so(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    """`[tools] approval_ttl` (issue 41, item 7): a call still pending that long after it was asked
    is `expired` — by the decision that comes too late (refused, one line, exit 65), by the next
    wake before its claim, and by `wake approvals` before it lists — never runs, is shown expired in
    the next arrival and by `wake approvals`, and carries a seal, so `wake verify --chain` vouches
    for it."""
    config = _config(store_config, server, tools=TOOLS.replace("[tools]\n", '[tools]\napproval_ttl = "1h"\n'))
    assert config.tools.approval_ttl == 3600
    deploy = session.build_registry(config).get("deploy")
    from wake.witness import manifest

    now = dt.datetime.now(dt.UTC)

    async def ask(target: str, ago: dt.timedelta) -> int:
        async with stores.connected(config) as st, st.pg_conn() as conn:
            q = await approvals.queue(
                conn, agent_id="demo", wake_id=uuid.uuid4(), tier="surface", turn=1, call_id=f"c-{target}", tool="deploy",
                tool_hash=manifest.tool_hash(deploy), arguments={"target": target}, reason="r", reason_from="arguments", at=now - ago,
            )
        return q.id

    async with sessions.ready_stores(config):
        pass
    late, in_time, waited = await ask("late", dt.timedelta(hours=2)), await ask("in-time", dt.timedelta(minutes=50)), \
        await ask("waited", dt.timedelta(hours=3))
    refused = _cli(config, "approvals", "approve", str(late), "--by", "alice")
    _one_line(refused, 65, f"approval {late} expired at")
    assert "approval_ttl (1h)" in refused.stderr and "will not run" in refused.stderr
    assert _cli(config, "approvals", "approve", str(in_time), "--by", "alice").returncode == 0  # 50 minutes: in time
    rows = {r.id: r for r in await _rows(config)}
    assert (rows[late].state, rows[late].decided_by) == ("expired", approvals.EXPIRED_BY)
    assert rows[waited].state == "pending"  # the refused decision expired its own approval only

    server.push(completion("Noted."))
    woke = await _wake(config, fence=1)  # expires `waited` before its claim, runs `in_time`
    assert woke.status == "completed", woke.error
    assert [c["target"] for c in approval_tools.CALLS if c["tool"] == "deploy"] == ["in-time"]
    rows = {r.id: r for r in await _rows(config)}
    assert (rows[waited].state, rows[waited].decided_by) == ("expired", approvals.EXPIRED_BY)
    block = marked.plain(_block(woke).text)
    for target in ("late", "waited"):
        line = next(x for x in block.splitlines() if f'"target": "{target}"' in x)
        assert "expired at" in line and "will not run" in line, block
    assert "Decided since your last wake:" in block and "ran in this wake: ok" in block

    listed_late = await ask("listed", dt.timedelta(hours=5))
    shown = _cli(config, "approvals")  # expires `listed` and shows it among the open ones
    assert shown.returncode == 0, shown.stderr
    assert f"approval {listed_late}  demo  expired  deploy" in shown.stdout and "not decided within [tools] approval_ttl" in shown.stdout
    every = json.loads(_cli(config, "approvals", "--all", "--json").stdout)
    assert {a["id"]: a["state"] for a in every} == {late: "expired", in_time: "ran", waited: "expired", listed_late: "expired"}
    again = _cli(config, "approvals", "reject", str(waited), "--by", "bob")
    _one_line(again, 65, f"approval {waited} expired at")
    async with stores.connected(config) as st, st.pg_conn() as conn:
        assert await approvals.unsealed(conn, "demo") == []  # the harness's expiries are sealed decisions
        await conn.execute("UPDATE tool_approvals SET state = 'approved' WHERE id = $1", waited)  # a forger revives one
        assert [u.id for u in await approvals.unsealed(conn, "demo")] == [waited]
    assert len([c for c in approval_tools.CALLS if c["tool"] == "deploy"]) == 1
