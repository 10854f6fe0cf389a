"""wake through a real PgBouncer in transaction mode (Debian's 1.18: no prepared statements across
transactions): the tool role's scope, a wake, and the CLI, with `postgres.pooler = "transaction"`.

Each transaction of a client may run on another server connection there, and a client's backend
pid is PgBouncer's own: the scope must come from the login (docs/isolation.md), the migrations'
lock must be a transaction's, and asyncpg must keep no prepared statement (docs/configuration.md,
"Through a connection pooler"). PgBouncer comes from tests/support/external_stores.sh
(`WAKE_EXT_POOLER=pgbouncer`); without it these tests skip and say why, except under
`WAKE_REQUIRE_PGBOUNCER=1`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from ledgers import daybook, fences, schema, scope
from tests.support import cli_fork, pooler, wakes
from tests.support.ledger_ctx import wake_ctx
from wake import config as wake_config
from wake import stores
from wake.config import Config
from wake.errors import StoreUnavailable

T0 = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
AGENTS = ("alice", "bob", "carol")
# concurrent tool transactions per agent: more clients than the agents' server connections are kept busy
ROUNDS = 12


@pytest.fixture
def pooled_dsn(pg_dsn: str) -> str:
    """This test's database through PgBouncer."""
    return pooler.through(pg_dsn, pooler.dsn_or_skip())


def _write(tmp_path: Path, dsn: str, redis_url: str, *, mode: str = "transaction") -> Path:
    (tmp_path / "persona.md").write_text("You are a test agent.\n")
    agents = "".join(f'[agents.{a}]\npersona_files = ["persona.md"]\n[agents.{a}.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\n'
                     for a in AGENTS)
    path = tmp_path / "wake.toml"
    path.write_text(f'state_dir = "{tmp_path / "state"}"\n[postgres]\ndsn = "{dsn}"\npooler = "{mode}"\n'
                    f'[redis]\nurl = "{redis_url}"\n{agents}')
    return path


def _config(tmp_path: Path, dsn: str, redis_url: str, *, mode: str = "transaction") -> Config:
    return wake_config.load_config_file(_write(tmp_path, dsn, redis_url, mode=mode), environ={})


async def test_the_pooler_is_in_transaction_mode_and_its_pids_are_its_own(pooled_dsn: str) -> None:
    """What the tests below rely on: two clients take turns on one server connection (a session
    pool would give the second its own), and the pid a client was told is no backend's."""
    a = await asyncpg.connect(pooled_dsn, statement_cache_size=0)
    b = await asyncpg.connect(pooled_dsn, statement_cache_size=0)
    try:
        first = await a.fetchval("SELECT pg_backend_pid()")
        second = await b.fetchval("SELECT pg_backend_pid()")  # the server a just released (PgBouncer reuses the last one)
        assert first == second
        assert a.get_server_pid() != first
    finally:
        await a.close()
        await b.close()


async def test_each_agents_tools_see_only_its_rows_through_the_pooler(tmp_path: Path, pooled_dsn: str, redis_url: str) -> None:
    config = _config(tmp_path, pooled_dsn, redis_url)
    async with stores.connected(config, neo4j=False) as st:
        async with st.pg_conn() as conn:
            for agent in AGENTS:
                await fences.advance(conn, agent, 1)
                await daybook.append(conn, agent_id=agent, wake_id=None, entry=f"{agent}'s day", written_at=T0)

        async def tool(agent: str, n: int) -> tuple[str, set[str], str | None, int]:
            ctx = wake_ctx(config, st, T0, agent_id=agent, tier="whisper", fence=1)
            async with ctx.write() as conn, conn.transaction():
                seen = {r["agent_id"] for r in await conn.fetch("SELECT agent_id FROM daybook")}
                await conn.execute("INSERT INTO daybook (agent_id, entry, written_at) VALUES ($1, $2, $3)", agent, f"{agent} {n}", T0)
                scoped = await scope.scoped_agent(conn)
                backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
            return agent, seen, scoped, backend

        results = await asyncio.gather(*(tool(agent, n) for n in range(ROUNDS) for agent in AGENTS))
        for agent, seen, scoped, _ in results:
            assert (seen, scoped) == ({agent}, agent)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            async with wake_ctx(config, st, T0, agent_id="alice", tier="whisper", fence=1).write() as conn:
                await daybook.append(conn, agent_id="bob", wake_id=None, entry="written into bob", written_at=T0)
        async with st.pg_conn() as conn:
            rows = await conn.fetch("SELECT agent_id, count(*) AS n FROM daybook GROUP BY agent_id ORDER BY agent_id")
        assert [(r["agent_id"], r["n"]) for r in rows] == [(a, ROUNDS + 1) for a in AGENTS]
        # the transactions ran on fewer server connections than there were clients: the pooler shared them
        assert len({backend for *_, backend in results}) < len(results)


async def test_a_wake_settles_through_the_pooler(tmp_path: Path, pooled_dsn: str, redis_url: str) -> None:
    config = _config(tmp_path, pooled_dsn, redis_url)
    async with stores.connected(config, neo4j=False) as st:
        outcomes = [await wakes.run(config, st, agent_id=agent) for agent in AGENTS for _ in range(2)]
        async with st.pg_conn() as conn:
            rows = await conn.fetch("SELECT agent_id, status FROM wake_introspection_ledger ORDER BY started_at")
    assert all(o.status in ("completed", "quiet") for o in outcomes), [(o.status, o.error) for o in outcomes]
    assert sorted(r["agent_id"] for r in rows) == sorted([*AGENTS, *AGENTS])
    assert all(r["status"] in ("completed", "quiet") for r in rows)


async def test_two_migrations_at_once_through_the_pooler_apply_each_file_once(empty_pg_dsn: str) -> None:
    dsn = pooler.through(empty_pg_dsn, pooler.dsn_or_skip())
    conns = [await asyncpg.connect(dsn, statement_cache_size=0) for _ in range(2)]
    try:
        done = await asyncio.gather(*(schema.migrate(c) for c in conns))
        assert sorted(m.version for run in done for m in run) == list(range(1, schema.head() + 1))
        assert await schema.check(conns[0]) == schema.head()
    finally:
        for c in conns:
            await c.close()


async def test_without_the_pooler_key_the_refusal_says_what_to_set(tmp_path: Path, pooled_dsn: str, redis_url: str) -> None:
    config = _config(tmp_path, pooled_dsn, redis_url, mode="none")
    with pytest.raises(StoreUnavailable, match='set postgres.pooler = "transaction"'):
        await stores.open_stores(config, neo4j=False)


def test_the_cli_migrates_wakes_and_reads_the_ledger_through_the_pooler(tmp_path: Path, empty_pg_dsn: str, redis_url: str) -> None:
    dsn = pooler.through(empty_pg_dsn, pooler.dsn_or_skip())
    path = _write(tmp_path, dsn, redis_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env.update(WAKE_LOG_FORMAT="json", WAKE_STATE_DIR=str(tmp_path / "state"))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return cli_fork.run([sys.executable, "-m", "wake", "--config", str(path), *args], capture_output=True, text=True,
                              timeout=180, env=env, stdin=subprocess.DEVNULL)

    migrated = cli("migrate")
    assert migrated.returncode == 0, migrated.stderr
    woke = cli("up", "--agent", "alice", "--tier", "whisper", "--json")
    assert woke.returncode == 0, woke.stderr
    outcome = json.loads(woke.stdout)
    assert outcome["status"] in ("completed", "quiet"), outcome
    ledger = cli("ledger", "--agent", "alice", "--json")
    assert ledger.returncode == 0, ledger.stderr
    assert outcome["wake_id"] in ledger.stdout
