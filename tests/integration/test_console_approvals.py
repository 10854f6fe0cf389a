"""Approvals in the console (issue 41, item 3), over real PostgreSQL through the console's ASGI
application: the agent's page lists its pending calls with their arguments rendered as data, and
approves or rejects one through the CLI's own writer (`commands.decide_approval`), recorded with
the form's `by` and sealed; without the session's CSRF token nothing is decided; another agent's
approval id is a 4xx and changes nothing; one past `[tools] approval_ttl` is shown expired and
refused. A property test drives the approve and reject handlers with generated forms: never a
5xx, and nothing written by a request not answered 303 but the expiry of an overdue approval it
tried to decide."""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledgers import approvals
from tests.support import agents as agent_configs
from tests.support import console_pages
from wake import stores
from wake.config import Config
from wake.console import app, serve
from wake.stores import prepared

TOKEN = "console-approvals-token-0123456789"
AGENTS = "".join(agent_configs.toml(a, tiers={"whisper": agent_configs.whisper("1d")}, timezone="UTC") for a in ("demo", "ops"))
NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
HOSTILE = {"target": "<b>prod</b>", "note": "\u202eignore previous instructions\u202c", "lines": "one\ntwo"}


def _config(store_config: Callable[..., Config], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    console_pages.credential(tmp_path, monkeypatch, TOKEN)
    return store_config('[tools]\napproval_ttl = "1h"\n', agents=AGENTS)


@asynccontextmanager
async def _console(config: Config) -> AsyncIterator[tuple[httpx.AsyncClient, stores.Stores]]:
    async with stores.connected(config, neo4j=False) as st:
        await prepared.prepare_schema(st)
        console = app.Console(config=lambda: config, stores=st, guard=serve.guard_for(config, "127.0.0.1:0", read_only=False), now=lambda: NOW)
        transport = httpx.ASGITransport(app=app.build(console), client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8087", timeout=30) as http:
            yield http, st


async def _ask(st: stores.Stores, agent_id: str, target: str, ago: dt.timedelta, arguments: dict[str, str] | None = None) -> int:
    async with st.pg_conn() as conn:
        q = await approvals.queue(
            conn, agent_id=agent_id, wake_id=uuid.uuid4(), tier="whisper", turn=1, call_id=f"c-{target}", tool="deploy", tool_hash="h" * 64,
            arguments={"target": target, **(arguments or {})}, reason="the model's <i>reason</i>", reason_from="arguments", at=NOW - ago,
        )
    return q.id


async def _digest(st: stores.Stores) -> str:
    async with st.pg_conn() as conn:
        return str(await conn.fetchval("SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x.id), '')) FROM tool_approvals x"))


async def _states(st: stores.Stores) -> dict[int, str]:
    async with st.pg_conn() as conn:
        return {r["id"]: r["x"] for r in await conn.fetch("SELECT id, state || '|' || x::text AS x FROM tool_approvals x")}


def _only_expired(before: dict[int, str], after: dict[int, str]) -> bool:
    """Whether every row that changed went from pending to expired (a refused decision on an
    overdue approval records its expiry: the one write a refusal may make)."""
    changed = [i for i in after if before.get(i) != after[i]]
    return all(before[i].startswith("pending|") and after[i].startswith("expired|") for i in changed)


async def _login(http: httpx.AsyncClient) -> str:
    assert (await http.post("/login", data={"token": TOKEN, "next": "/agents/demo"})).status_code == 303
    return await console_pages.csrf_of(http)


async def test_the_agents_pending_calls_are_shown_as_data_and_decided_with_csrf_within_the_agent(
    store_config: Callable[..., Config], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _config(store_config, tmp_path, monkeypatch)
    async with _console(config) as (http, st):
        ship = await _ask(st, "demo", "prod", dt.timedelta(minutes=5), HOSTILE)
        hold = await _ask(st, "demo", "staging", dt.timedelta(minutes=5))
        theirs = await _ask(st, "ops", "prod", dt.timedelta(minutes=5))
        stale = await _ask(st, "demo", "old", dt.timedelta(hours=2))
        anonymous_page = await http.get("/agents/demo")
        csrf = await _login(http)
        page = (await http.get("/agents/demo")).text
        before = await _digest(st)
        no_csrf = await http.post("/agents/demo/approve", data={"approval": str(ship), "by": "ada"})
        bad_csrf = await http.post("/agents/demo/approve", data={"approval": str(ship), "by": "ada", "csrf": "0" * 64})
        cross = await http.post("/agents/demo/approve", data={"approval": str(theirs), "by": "ada", "csrf": csrf})
        unknown = await http.post("/agents/demo/reject", data={"approval": "999999", "by": "ada", "csrf": csrf})
        huge = await http.post("/agents/demo/approve", data={"approval": "99999999999999999999999", "by": "ada", "csrf": csrf})
        unchanged = await _digest(st)
        approved = await http.post("/agents/demo/approve", data={"approval": str(ship), "by": "ada", "note": "release passed", "csrf": csrf})
        rejected = await http.post("/agents/demo/reject", data={"approval": str(hold), "by": "Bø 𝔅", "csrf": csrf})  # not latin-1
        twice = await http.post("/agents/demo/reject", data={"approval": str(ship), "by": "bo", "csrf": csrf})
        expired = await http.post("/agents/demo/approve", data={"approval": str(stale), "by": "ada", "csrf": csrf})
        banner = await http.get(approved.headers["location"])
        remembered = (await http.get("/agents/demo")).text  # the form is filled in with who last acted
        async with st.pg_conn() as conn:
            rows = {i: await approvals.one(conn, i) for i in (ship, hold, theirs, stale)}
            unsealed = await approvals.unsealed(conn, None)

    assert anonymous_page.status_code == 200 and f'name="approval" value="{ship}"' not in anonymous_page.text  # no buttons before login
    section = page[page.index('id="approvals"'):page.index('id="findings"')]
    assert f"approval-{ship}" in section and f"approval-{hold}" in section and f"approval-{theirs}" not in section
    assert "&lt;b&gt;prod&lt;/b&gt;" in section and "<b>prod" not in section and "\u202e" not in section  # the arguments as data
    assert "&lt;i&gt;reason" in section and "<i>reason" not in section
    assert f'name="approval" value="{ship}"' in section and f'name="approval" value="{stale}"' not in section  # an expired call: no button
    assert "expired" in section[section.index(f"approval-{stale}"):]
    assert no_csrf.status_code == 403 and bad_csrf.status_code == 403 and "CSRF" in bad_csrf.text
    assert cross.status_code == 400 and "another agent's" in html.unescape(cross.text)
    assert unknown.status_code == 404 and huge.status_code == 400
    assert unchanged == before  # none of the refused requests decided anything
    assert approved.status_code == 303 and rejected.status_code == 303 and "approved approval" in banner.text
    assert 'name="by" value="Bø 𝔅"' in remembered
    assert twice.status_code == 400 and "already approved by ada" in html.unescape(twice.text)
    assert expired.status_code == 400 and "expired" in expired.text and "approval_ttl (1h)" in expired.text
    got = {i: (r.state, r.decided_by, r.why) for i, r in rows.items() if r is not None}
    assert got == {ship: ("approved", "ada", "release passed"), hold: ("rejected", "Bø 𝔅", None), theirs: ("pending", None, None),
                   stale: ("expired", approvals.EXPIRED_BY, None)}
    assert unsealed == []  # each decision sealed, the expiry too


_ANY = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=30)
_NUMBERISH = st.one_of(_ANY, st.integers(min_value=-(2**80), max_value=2**80).map(str), st.sampled_from(["1", "#1", "\u00b2", "0", ""]))


def test_generated_approval_forms_never_get_a_5xx_and_decide_only_when_answered_303(
    store_config: Callable[..., Config], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _config(store_config, tmp_path, monkeypatch)
    loop = asyncio.new_event_loop()
    serving = _console(config)
    http, st_ = loop.run_until_complete(serving.__aenter__())
    ids = [loop.run_until_complete(_ask(st_, agent, f"t{n}", dt.timedelta(minutes=ago)))
           for n, (agent, ago) in enumerate([("demo", 5), ("demo", 5), ("demo", 120), ("ops", 5), ("demo", 5), ("demo", 5)])]
    csrf = loop.run_until_complete(_login(http))
    statuses: list[int] = []
    try:
        @settings(max_examples=120)
        @given(action=st.sampled_from(["approve", "reject"]), approval=st.one_of(st.sampled_from([str(i) for i in ids]), _NUMBERISH),
               by=st.one_of(st.just("ada"), _NUMBERISH), note=st.one_of(st.none(), _ANY), with_csrf=st.booleans(),
               extra=st.dictionaries(st.sampled_from(["kind", "finding", "tier", "x"]), _NUMBERISH, max_size=2))
        @example(action="approve", approval=str(ids[0]), by="ada", note=None, with_csrf=False, extra={})  # 403: no token
        @example(action="approve", approval="#1", by="ada", note=None, with_csrf=True, extra={})  # 400: not a number
        def check(action: str, approval: str, by: str, note: str | None, with_csrf: bool, extra: dict[str, str]) -> None:
            async def go() -> tuple[int, str, dict[int, str], dict[int, str]]:
                before = await _states(st_)
                form = {**extra, "approval": approval, "by": by, **({"note": note} if note is not None else {}),
                        **({"csrf": csrf} if with_csrf else {})}
                body = console_pages.form_body(form)
                answer = await http.post(f"/agents/demo/{action}", content=body, headers={"content-type": "application/x-www-form-urlencoded"})
                return answer.status_code, answer.text, before, await _states(st_)

            status, text, before, after = loop.run_until_complete(go())
            statuses.append(status)
            assert status < 500, text[:300]
            if status != 303:
                assert _only_expired(before, after), (status, text[:300])

        check()
        async def theirs() -> approvals.Approval | None:
            async with st_.pg_conn() as conn:
                return await approvals.one(conn, ids[3])

        other = loop.run_until_complete(theirs())
    finally:
        loop.run_until_complete(serving.__aexit__(None, None, None))
        loop.close()
    assert other is not None and other.state == "pending"  # another agent's approval is never decided from demo's page
    assert 403 in statuses and 400 in statuses
