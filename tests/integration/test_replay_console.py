"""Stored replays and eval scorecards, read back (docs/replay.md, "Reading replays"): `wake show`
of a replay id or prefix, and the console's replay and eval pages over real PostgreSQL, served by
uvicorn on a free port, against the scripted OpenAI-compatible server. A replay is shown only
under its own agent's URL; the text a model or a tool wrote is shown as marked data; the latest
scorecard's chart is a PNG drawn from the stored row; generated paths and queries on these routes
never get a 5xx."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support import agents as agent_configs
from tests.support import console_pages, wakes
from tests.support.openai_server import ScriptedServer, completion
from wake import stores
from wake.cli.main import cli
from wake.config import Config
from wake.console import serve

EVIL = "<b>evil</b> \u202eexe.txt"  # markup and a bidi override, as a model might write them


@pytest.fixture
def config(store_config: Callable[..., Config], server: ScriptedServer) -> Config:
    persona = [agent_configs.PERSONA]
    agents = agent_configs.toml(tiers={"surface": agent_configs.SURFACE + '\nok_token = "NOTHING"'}, timezone="UTC", extra=persona)
    agents += agent_configs.toml("other", tiers={"surface": agent_configs.SURFACE}, timezone="UTC", extra=persona)
    return store_config(agent_configs.tools("replay_tools") + agent_configs.scripted(server.url), agents=agents)


async def _record(config: Config, agent_id: str) -> str:
    o = await wakes.once(config, agent_id=agent_id, tier="surface")
    assert o.status in ("completed", "quiet"), o.error
    return str(o.wake_id)


def _cli(config: Config, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--config", str(config.path), *args])


def _replayed(config: Config, server: ScriptedServer, agent_id: str, final: str) -> tuple[str, str]:
    """A recorded wake of `agent_id` and a replay of it whose final answer is `final`: (wake id, replay id)."""
    server.push(completion(None, [("peek", {"what": "queue"})]), completion("NOTHING"))
    wake_id = asyncio.run(_record(config, agent_id))
    server.push(completion(None, [("peek", {"what": "queue"})]), completion(final))
    got = _cli(config, "replay", wake_id, "--json")
    assert got.exit_code == 0, got.output
    return wake_id, json.loads(got.stdout)["replay_id"]


def test_wake_show_shows_a_stored_replay_by_id_or_prefix(config: Config, server: ScriptedServer) -> None:
    wake_id, replay_id = _replayed(config, server, "demo", "Wrote nothing.")
    text = _cli(config, "show", replay_id[:8])
    assert text.exit_code == 0, text.output
    assert text.output.startswith(f"replay {replay_id} of wake {wake_id} (demo/surface)")
    assert "first divergence: turn 2, the final answer" in text.output and "+Wrote nothing." in text.output
    assert "blocks sent:" in text.output and "tools declared:" in text.output and re.search(r"  peek +[0-9a-f]{64}", text.output)
    as_json = _cli(config, "show", replay_id, "--json")
    assert json.loads(as_json.stdout)["replay_id"] == replay_id and json.loads(as_json.stdout)["wake_id"] == wake_id
    said = _cli(config, "show", replay_id[:8], "--transcript")
    assert said.exit_code == 0, said.output
    assert said.output.startswith(f"replay {replay_id} of wake {wake_id}") and "answered from recorded" in said.output
    said_json = json.loads(_cli(config, "show", replay_id, "--transcript", "--json").stdout)
    assert [(c["tool"], c["answered_from"]) for c in said_json["calls"]] == [("peek", "recorded")]
    arrival = _cli(config, "show", replay_id, "--arrival", "--json")
    names = [b["name"] for b in json.loads(arrival.stdout)]
    wake_arrival = [b["name"] for b in json.loads(_cli(config, "show", wake_id, "--arrival", "--json").stdout)]
    assert names == wake_arrival and all(b["text"] for b in json.loads(arrival.stdout))  # the recorded order, every text stored
    assert json.loads(_cli(config, "show", wake_id[:8], "--json").stdout)["wake_id"] == wake_id  # a wake is still a wake
    assert _cli(config, "replay", "show", replay_id[:8]).output == text.output  # the same as `wake replay show`
    missing = _cli(config, "show", "ffffffff")
    assert missing.exit_code == 1 and "no wake matches 'ffffffff'" in missing.output

    twin = uuid.UUID(wake_id[:9] + str(uuid.uuid4())[9:])  # a replay whose id starts as the wake's does
    asyncio.run(_copy_replay(config, replay_id, twin))
    shared = _cli(config, "show", wake_id[:8])
    assert shared.exit_code == 1 and f"matches wake {wake_id} and replay {twin} (give more of the id)" in shared.output
    assert "Traceback" not in shared.output
    assert json.loads(_cli(config, "show", str(twin), "--json").stdout)["replay_id"] == str(twin)  # a full id is one or the other


async def _copy_replay(config: Config, replay_id: str, new_id: uuid.UUID) -> None:
    async with stores.connected(config) as st, st.pg_conn() as conn, conn.transaction():
        await conn.execute(f"CREATE TEMP TABLE copied ON COMMIT DROP AS SELECT * FROM wake_replays WHERE replay_id = '{uuid.UUID(replay_id)}'")
        await conn.execute(f"UPDATE copied SET replay_id = '{new_id}'")
        await conn.execute("INSERT INTO wake_replays SELECT * FROM copied")


@asynccontextmanager
async def _serving(config: Config) -> AsyncIterator[str]:
    runner = serve.Runner(lambda: config, listen="127.0.0.1:0", guard=serve.guard_for(config, "127.0.0.1:0", read_only=True))
    async with stores.connected(config, neo4j=False) as st:
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(st, stop))
        try:
            await asyncio.wait_for(runner.started.wait(), 60)
            yield runner.url
        finally:
            stop.set()
            await asyncio.wait_for(task, 60)


def test_the_console_shows_an_agents_replay_and_its_latest_scorecard_and_chart(config: Config, server: ScriptedServer) -> None:
    wake_id, replay_id = _replayed(config, server, "demo", EVIL)
    _, other_replay = _replayed(config, server, "other", "Other agent's words.")
    server.push(completion(None, [("peek", {"what": "queue"})]), completion("NOTHING"))  # a second recorded wake of demo
    asyncio.run(_record(config, "demo"))
    for _ in range(2):  # `wake eval` over both, as recorded
        server.push(completion(None, [("peek", {"what": "queue"})]), completion("NOTHING"))
    evaluated = _cli(config, "eval", "--agent", "demo", "--json")
    assert evaluated.exit_code == 0, evaluated.output
    eval_id = json.loads(evaluated.stdout)["eval_id"]
    assert eval_id

    async def visit() -> dict[str, httpx.Response]:
        async with _serving(config) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
            paths = {
                "list": "/agents/demo/replays", "one": f"/agents/demo/replays/{replay_id}", "prefix": f"/agents/demo/replays/{replay_id[:8]}",
                "theirs": f"/agents/demo/replays/{other_replay}", "theirs_prefix": f"/agents/demo/replays/{other_replay[:8]}",
                "eval": f"/agents/demo/evals/{eval_id}", "chart": f"/agents/demo/evals/{eval_id}/chart.png",
                "their_eval": f"/agents/other/evals/{eval_id}", "their_chart": f"/agents/other/evals/{eval_id}/chart.png",
                "nobody": "/agents/nobody/replays", "agent": "/agents/demo",
            }
            return {k: await http.get(p) for k, p in paths.items()}

    got = asyncio.run(visit())
    assert {k: r.status_code for k, r in got.items()} == {
        "list": 200, "one": 200, "prefix": 303, "theirs": 404, "theirs_prefix": 404, "eval": 200, "chart": 200, "their_eval": 404,
        "their_chart": 404, "nobody": 404, "agent": 200,
    }
    assert got["prefix"].headers["location"] == f"/agents/demo/replays/{replay_id}"
    assert 'href="/agents/demo/replays"' in got["agent"].text
    listing = got["list"].text
    assert replay_id[:8] in listing and other_replay[:8] not in listing and "diverged at turn 2 (final)" in listing
    assert f"/agents/demo/evals/{eval_id}/chart.png" in listing and 'data-check="clean_calls"' in listing  # the latest scorecard
    page = got["one"].text
    assert f"/wakes/{wake_id}" in page and "first divergence: turn 2, the final answer" in page
    final = page[page.index('id="final-text"'):]
    assert '<span class="data" title="stored text">&lt;b&gt;evil&lt;/b&gt; &lt;U+202E&gt;exe.txt</span>' in final  # marked data, the override visible
    assert "<b>evil" not in page and "\u202e" not in page
    assert "answered from recorded" in page and "Other agent" not in page
    assert "has no replay matching" in got["theirs"].text and "Other agent" not in got["theirs"].text  # nothing of it shown
    assert got["chart"].headers["content-type"] == "image/png" and got["chart"].content[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(got["chart"].content) > 1000
    assert "no check regressed" in got["eval"].text and 'class="chart"' in got["eval"].text


def _quote(text: str) -> str:
    """A path segment percent-encoded, lone surrogates and all (as bytes no UTF-8 decoder accepts)."""
    return urllib.parse.quote(text.encode("utf-8", "surrogatepass"), safe="")


_ANY = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=40)
_SEGMENT = st.one_of(_ANY, st.sampled_from(["demo", "other", "nobody", "", "ffffffff", "0000", "%", "..", "chart.png"]))
_PATH = st.tuples(
    _SEGMENT, st.sampled_from(["/replays", "/replays/", "/evals/", "/evals/{}/chart.png"]), _SEGMENT,
).map(lambda t: f"/agents/{_quote(t[0])}" + (
    t[1].format(_quote(t[2])) if "{}" in t[1] else t[1] + (_quote(t[2]) if t[1].endswith("/") else "")
))
_QUERY = st.dictionaries(st.sampled_from(["limit", "done", "done_mac", "agent", "x"]), _ANY, max_size=3)


def test_generated_paths_and_queries_on_the_replay_routes_never_get_a_5xx(config: Config, server: ScriptedServer) -> None:
    _, replay_id = _replayed(config, server, "demo", "words")
    known = st.sampled_from([f"/agents/demo/replays/{replay_id}", f"/agents/other/replays/{replay_id}", f"/agents/demo/replays/{replay_id[:6]}",
                             f"/agents/demo/evals/{replay_id}", f"/agents/demo/evals/{replay_id}/chart.png"])
    loop = asyncio.new_event_loop()
    serving = _serving(config)
    url = loop.run_until_complete(serving.__aenter__())
    http = httpx.AsyncClient(base_url=url, timeout=30)
    statuses: list[int] = []
    try:
        @settings(max_examples=120, deadline=None)
        @given(path=st.one_of(_PATH, known), query=_QUERY)
        @example(path=f"/agents/demo/replays/{replay_id}", query={})  # 200: the replay
        @example(path=f"/agents/other/replays/{replay_id}", query={})  # 404: not that agent's
        def check(path: str, query: dict[str, str]) -> None:
            answer = loop.run_until_complete(http.get(console_pages.with_query(path, query)))
            statuses.append(answer.status_code)
            assert answer.status_code < 500, (path, answer.text[:300])

        check()
    finally:
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(serving.__aexit__(None, None, None))
        loop.close()
    # the explicit examples run first, and each got the answer it stands for (not left to the draws)
    assert sorted(statuses[:2]) == [200, 404], statuses[:2]
