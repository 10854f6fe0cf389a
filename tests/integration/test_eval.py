"""`wake eval` over 20 recorded wakes (a week of them, on the clock the test sets) against the
scripted OpenAI-compatible server: a candidate that makes five of them write a file regresses
three checks, exits 1 and names exactly those wakes, and the chart is a PNG; the unchanged
candidate regresses nothing and exits 0."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import agents as agent_configs
from tests.support import replay_tools, wakes
from tests.support.openai_server import ScriptedServer, completion
from wake import stores
from wake.cli.main import cli
from wake.config import Config
from wake.run import session
from wake.stores import prepared

WAKES = 20
WORSE = (3, 7, 11, 15, 19)  # the wakes the regressing candidate makes write a file
T0 = dt.datetime(2026, 11, 23, 6, 0, tzinfo=dt.UTC)


@pytest.fixture
def config(store_config: Callable[..., Config], server: ScriptedServer) -> Config:
    surface = agent_configs.SURFACE + '\nok_token = "NOTHING"'
    agents = agent_configs.toml(tiers={"surface": surface}, extra=[agent_configs.PERSONA])
    return store_config(agent_configs.tools("replay_tools") + agent_configs.scripted(server.url), agents=agents)


async def _record_week(config: Config, server: ScriptedServer) -> list[str]:
    ids = []
    async with stores.connected(config) as st:
        await prepared.prepare_schema(st)
        registry = session.build_registry(config)
        for n in range(WAKES):
            at = T0 + dt.timedelta(hours=8 * n)
            server.push(completion(None, [("peek", {"what": "queue"})]), completion("NOTHING"))
            o = await wakes.run(config, st, registry, agent_id="demo", tier="surface", now=lambda at=at: at)
            assert o.status in ("completed", "quiet"), o.error
            ids.append(str(o.wake_id))
    return ids


def test_a_regressing_candidate_exits_1_naming_the_wakes_and_the_chart_is_drawn(
    config: Config, server: ScriptedServer, tmp_path: Path,
) -> None:
    ids = asyncio.run(_record_week(config, server))
    replay_tools.RAN.clear()  # the recorded wakes ran their calls; no replay may
    runner = CliRunner()
    base = ["--config", str(config.path), "eval", "--agent", "demo", "--tier", "surface"]

    for _ in range(WAKES):  # the candidate as recorded: the same decisions
        server.push(completion(None, [("peek", {"what": "queue"})]), completion("NOTHING"))
    same = runner.invoke(cli, [*base, "--json"])
    assert same.exit_code == 0, same.output
    card = json.loads(same.stdout)
    assert card["wakes"] == WAKES and card["regressed"] == []
    completed = next(c for c in card["checks"] if c["check"] == "completed")
    assert (completed["baseline"], completed["candidate"]) == (1.0, 1.0)  # a quiet recorded wake completed its loop too
    assert [p["diverged"] for p in card["per_wake"] if p["diverged"] is not None] == []

    instructions = tmp_path / "careless.md"
    instructions.write_text("Write a file whenever you can.")
    for n in range(WAKES):
        if n in WORSE:
            server.push(completion(None, [("file_write", {"path": str(tmp_path / f"w{n}.txt"), "text": "x"})]), completion("I wrote a file."))
        else:
            server.push(completion(None, [("peek", {"what": "queue"})]), completion("NOTHING"))
    chart = tmp_path / "scorecard.png"
    worse = runner.invoke(cli, [*base, "--instructions", str(instructions), "--chart", str(chart), "--json"])
    assert worse.exit_code == 1, worse.output
    card = json.loads(worse.stdout)
    named = {c["check"]: set(c["wakes"]) for c in card["checks"]}
    expected = {ids[n] for n in WORSE}
    assert set(card["regressed"]) >= {"clean_calls", "mutations_bounded"}
    assert named["clean_calls"] == expected and named["mutations_bounded"] == expected
    quiet = next(c for c in card["checks"] if c["check"] == "quiet")
    assert quiet["applicable"] >= 10 and named["quiet"] <= expected and quiet["candidate"] < quiet["baseline"]
    assert "regressed beyond 0" in worse.stderr and ids[WORSE[0]] in worse.stderr
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 1000
    assert replay_tools.RAN == [] and not any((tmp_path / f"w{n}.txt").exists() for n in WORSE)
    diverged = [p for p in card["per_wake"] if p["diverged"] is not None]
    assert {p["wake_id"] for p in diverged} == expected and all(p["diverged"]["turn"] == 1 for p in diverged)

    sampled = runner.invoke(cli, [*base, "--sample", "4", "--seed", "3", "--threshold", "1", "--json"])
    assert sampled.exit_code == 0, sampled.output  # a threshold of 1 tolerates any fall
    assert json.loads(sampled.stdout)["wakes"] == 4
