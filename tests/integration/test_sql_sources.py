"""Operator-defined SQL sources : parameters from the wake context, READ ONLY,
a timeout, a row cap with the exact total, a template; every failure typed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import marked, sessions
from tests.support.ledger_ctx import wake_ctx
from untrusted import spotlight
from wake.arrival import engine as arrival
from wake.arrival import sources
from wake.config import Config, load_config_file
from wake.errors import ConfigError
from wake.run import cycle

NOW = dt.datetime(2026, 11, 29, 22, 30, tzinfo=dt.UTC)  # 23:30 in Stockholm

SOURCES = '''
[sql_sources.notes]
sql = """
SELECT n.body, $2::text AS tier, to_char($3::date, 'YYYY-MM-DD') AS local_day
  FROM ops_notes n
 WHERE n.agent = $1
 ORDER BY n.id;
"""
params = ["agent_id", "tier", "local_date"]
cache_tier = "session"
max_rows = 2
header = "Ops notes:"
template = "- {body} ({tier}, {local_day})"

[sql_sources.sneaky]
sql = "INSERT INTO ops_notes (agent, body) VALUES ($1, 'written by a source') RETURNING body"
params = ["agent_id"]
template = "{body}"

[sql_sources.slow]
sql = "SELECT pg_sleep(2)::text AS slept"
timeout_ms = 100
template = "{slept}"

[sql_sources.misnamed]
sql = "SELECT body FROM ops_notes"
template = "{title}"

[sql_sources.nothing]
sql = "SELECT body FROM ops_notes WHERE false"
template = "{body}"
empty_text = "No ops notes."
'''
AGENTS = '''
[agents.demo]
timezone = "Europe/Stockholm"
[agents.demo.tiers.full]
binds = ["wake"]
sources = ["notes", "sneaky", "slow", "misnamed", "nothing", "clock"]
'''


async def test_operator_sources_render_or_fail_typed(store_config: Callable[..., Config]) -> None:
    config = store_config(SOURCES, agents=AGENTS)
    async with sessions.ready_stores(config) as st:
        async with st.pg_conn() as conn:
            await conn.execute("CREATE TABLE ops_notes (id serial PRIMARY KEY, agent text, body text)")
            await conn.execute("INSERT INTO ops_notes (agent, body) VALUES ('demo', 'a'), ('demo', 'b'), ('demo', 'c'), ('other', 'x')")
        ctx = wake_ctx(config, st, NOW)
        source_list = cycle.tier_sources(config, "demo", "full")
        blocks = {b.name: b for b in await arrival.assemble(source_list, ctx, 5.0)}
        async with st.pg_conn() as conn:
            bodies = [r["body"] for r in await conn.fetch("SELECT body FROM ops_notes ORDER BY id")]
    notes = blocks["notes"]
    assert notes.cache_tier is arrival.CacheTier.session
    assert (notes.retrieval, notes.result, notes.rows) == ("ok", "present", 3)
    assert marked.plain(notes.text) == "Ops notes:\n- a (full, 2026-11-29)\n- b (full, 2026-11-29)\n(2 of 3 shown)"
    assert notes.text.count(spotlight.for_agent(ctx.agent_id).opening) == 6  # each text column is marked data
    sneaky = blocks["sneaky"]
    assert (sneaky.retrieval, sneaky.result) == ("failed", "unknown")
    assert "sql source 'sneaky' tried to write" in sneaky.text and "READ ONLY" in sneaky.text
    assert sneaky.text.startswith("could not check: ")
    assert "written by a source" not in bodies  # nothing was written
    assert blocks["slow"].retrieval == "failed" and "timed out after 100 ms" in blocks["slow"].text
    assert blocks["misnamed"].retrieval == "failed" and "template names column 'title'" in blocks["misnamed"].text
    assert "(columns: body)" in blocks["misnamed"].text
    assert (blocks["nothing"].retrieval, blocks["nothing"].result, blocks["nothing"].text) == ("ok", "empty", "No ops notes.")


def test_operator_source_names_resolve_only_through_config(store_config: Callable[..., Config]) -> None:
    config = store_config(SOURCES, agents=AGENTS)
    assert sources.resolve(config, "clock") is sources.BUILTIN["clock"]
    assert sources.resolve(config, "notes").name == "notes"


@pytest.mark.parametrize(
    ("toml", "key", "expected"),
    [
        ('[sql_sources.x]\nsql = "SELECT 1"\ntemplate = "{a}"\nparams = ["password"]\n', "sql_sources.x.params.0", "expected"),
        ('[sql_sources.x]\nsql = "SELECT 1"\ntemplate = "{a"\n', "sql_sources.x.template", "str.format template"),
        ('[sql_sources.x]\nsql = "SELECT 1"\ntemplate = "{}"\n', "sql_sources.x.template", "named fields only"),
        ('[sql_sources.clock]\nsql = "SELECT 1"\ntemplate = "{a}"\n', "sql_sources.clock", "not a built-in source"),
        ('[sql_sources.x]\nsql = "SELECT 1"\n', "sql_sources.x.template", "required key is missing"),
        ('[sql_sources.x]\nsql = "SELECT 1"\ntemplate = "{a}"\ntimeout_ms = 0\n', "sql_sources.x.timeout_ms", "greater than 0"),
    ],
)
def test_bad_sql_source_config_names_the_key(tmp_path: Path, toml: str, key: str, expected: str) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(toml + '[agents.a.tiers.full]\nbinds = ["wake"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config_file(path, environ={})
    assert caught.value.key == key and expected in caught.value.expected, caught.value


def test_unknown_sources_and_settled_state_source_are_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text('[agents.a]\nsettled_state_source = "nope"\n[agents.a.tiers.full]\nbinds = ["wake"]\n')
    with pytest.raises(ConfigError, match=r"agents\.a\.settled_state_source: unknown sql source 'nope'"):
        load_config_file(path, environ={})
    path.write_text('[agents.a.tiers.full]\nbinds = ["wake"]\nsources = ["nope"]\n')
    with pytest.raises(ConfigError, match=r"agents\.a\.tiers\.full\.sources\.0: unknown source 'nope'.*\[sql_sources\.<name>\]"):
        load_config_file(path, environ={})
