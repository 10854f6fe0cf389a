"""The console's actions are scoped to the agent in their URL (issue 40, 4): an operator's form
posted under alice's page with the id of one of bob's rows — a Cloister finding to acknowledge or
revert, a toxic flow to accept — is a 4xx and changes nothing, over real PostgreSQL and real
memory repositories; the same id under bob's page is acted on. Tool pins are not an agent's rows
(every agent's page lists the process's pins, docs/console.md), so there is no other agent's pin
to name; pause, resume and trigger name no row, only the agent of their URL."""

from __future__ import annotations

import datetime as dt
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ledgers import memory_ledger
from ledgers import tool_flows as flow_ledger
from memory.repo import MemoryRepo
from surfaces import flow_labels
from tests.support import console_pages
from wake import stores
from wake.config import Config
from wake.console import app, serve
from wake.stores import prepared
from wake.witness import flows

TOKEN = "console-scope-token-0123456789"
T0 = dt.datetime(2026, 12, 6, 10, 0, tzinfo=dt.UTC)
AGENTS = """
[agents.alice]
timezone = "UTC"
[agents.alice.tiers.full]
binds = ["wake"]
[agents.bob]
timezone = "UTC"
[agents.bob.tiers.full]
binds = ["wake"]
"""
# every table a console action writes, and the ones a revert would (its commit is a memory write)
WRITTEN = ("cloister_findings", "tool_flow_findings", "tool_flow_state", "wake_pauses", "wake_oneshots", "mcp_tool_findings",
           "mcp_tool_pins", "memory_writes")
async def _written(st: stores.Stores) -> dict[str, str | None]:
    async with st.pg_conn() as conn:
        return {t: await conn.fetchval(f"SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM {t} x") for t in WRITTEN}


async def test_an_action_under_one_agents_url_with_another_agents_row_is_4xx_and_changes_nothing(
    store_config: Callable[..., Config], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    console_pages.credential(tmp_path, monkeypatch, TOKEN)
    config = store_config("[console]\nlive_poll_s = 0.2\n", agents=AGENTS)
    repos = {a: MemoryRepo.open(config.memory_path(a), config.memory_config(a), at=T0) for a in ("alice", "bob")}
    heads = {a: r.git.head.target for a, r in repos.items()}
    binding = [console_pages.labelled("inbox", flow_labels.UNTRUSTED_INPUT), console_pages.labelled("vault", flow_labels.PRIVATE_DATA),
               console_pages.labelled("webhook", flow_labels.EGRESS)]
    async with stores.connected(config, neo4j=False) as st:
        await prepared.prepare_schema(st)
        async with st.pg_conn() as conn:
            bob_finding = await conn.fetchval(
                "INSERT INTO cloister_findings (agent_id, severity, domain, path, excerpt, rule, fingerprint, state, at)"
                " VALUES ('bob', 'HALT', 'memory', 'system/persona/persona.md', 'x', 'fields.changed', 'fp-bob', 'open', $1)"
                " RETURNING finding_id", T0)
            bob_flow = (await flows.vet(conn, "bob", "full", binding, "refuse", T0)).held.flow_id
            alice_flow = (await flows.vet(conn, "alice", "full", binding, "refuse", T0)).held.flow_id
        assert bob_flow is not None and bob_flow == alice_flow  # the same tools: the same flow id, each agent's own finding
        console = app.Console(config=lambda: config, stores=st, guard=serve.guard_for(config, "127.0.0.1:0", read_only=False))
        transport = httpx.ASGITransport(app=app.build(console), client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8087", timeout=30) as http:
            login = await http.post("/login", data={"token": TOKEN, "next": "/agents/alice"})
            assert login.status_code == 303, login.text
            page = await http.get("/agents/alice")  # it lists the open toxic flows (each without a diff: it was a 500)
            assert page.status_code == 200, page.text[-500:]
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
            assert csrf is not None, page.text[:500]
            form = {"by": "ops-anna", "csrf": csrf.group(1), "note": "crossed"}
            # alice's flow accepted first: then bob's is the only open finding of that id
            own = await http.post("/agents/alice/accept", data={**form, "kind": "toxic_flow", "finding": f"full/{alice_flow}"})
            assert own.status_code == 303, own.text
            before = await _written(st)
            crossed = {
                f"{action} {spelled!r}": await http.post(f"/agents/alice/{action}", data={**form, "finding": spelled})
                for action in ("ack", "revert") for spelled in (str(bob_finding), f"#{bob_finding}", f" {bob_finding} ")
            }
            crossed["accept toxic_flow"] = await http.post("/agents/alice/accept", data={**form, "kind": "toxic_flow",
                                                                                          "finding": f"full/{bob_flow}"})
            after = await _written(st)
            async with st.pg_conn() as conn:
                still = await memory_ledger.finding(conn, "bob", bob_finding)
                open_flows = await flow_ledger.open_of_agent(conn, "bob")
            # the same ids under bob's own URL are acted on: the refusals above are the scope, not a bad id
            acked = await http.post("/agents/bob/ack", data={**form, "finding": str(bob_finding)})
            accepted = await http.post("/agents/bob/accept", data={**form, "kind": "toxic_flow", "finding": f"full/{bob_flow}"})
    assert {k: r.status_code for k, r in crossed.items() if not 400 <= r.status_code < 500} == {}
    assert all(f"#{bob_finding} is not open" in r.text for k, r in crossed.items() if k.startswith("ack"))
    assert all(f"agent alice has no finding {bob_finding}" in r.text for k, r in crossed.items() if k.startswith("revert"))
    assert crossed["accept toxic_flow"].status_code == 404 and "of alice" in crossed["accept toxic_flow"].text
    assert after == before
    assert (still.state, still.acked_by) == ("open", None) and [f.flow_id for f in open_flows] == [bob_flow]
    assert {a: r.git.head.target for a, r in repos.items()} == heads  # no revert commit in either repository
    assert acked.status_code == 303 and "acknowledged" in urllib.parse.unquote_plus(acked.headers["location"])
    assert accepted.status_code == 303 and "accepted toxic flow" in urllib.parse.unquote_plus(accepted.headers["location"])
