"""Agents scoped by the database (docs/isolation.md): a tool's connection, through `ctx.read()` and
`ctx.write()`, sees and changes only its own agent's rows, whatever SQL it runs; the harness's own
connections still read every agent."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import asyncpg
import pytest

from ledgers import contact, daybook, fences, scope
from tests.support import agents as agent_configs
from tests.support.ledger_ctx import wake_ctx
from wake import stores
from wake.config import Config

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
AGENTS = "".join(agent_configs.toml(a, tiers={"whisper": agent_configs.whisper("15m")}, timezone="UTC") for a in ("alice", "bob"))


@pytest.fixture
def config(store_config: Callable[..., Config]) -> Config:
    return store_config(agents=AGENTS)


async def _seed(st: stores.Stores) -> None:
    async with st.pg_conn() as conn:
        for agent in ("alice", "bob"):
            await fences.advance(conn, agent, 1)
            await daybook.append(conn, agent_id=agent, wake_id=None, entry=f"{agent}'s day", written_at=T0)
            await contact.record(conn, agent_id=agent, author="human", channel="cli", body=f"private to {agent}", received_at=T0)


async def test_an_unscoped_query_in_alices_tool_sees_and_changes_only_alices_rows(config: Config) -> None:
    async with stores.connected(config, neo4j=False) as st:
        await _seed(st)
        ctx = wake_ctx(config, st, T0, agent_id="alice", tier="whisper", fence=1)
        # the tool forgot its WHERE agent_id (or the model wrote the SQL)
        async with ctx.read() as conn:
            seen = {r["agent_id"] for r in await conn.fetch("SELECT agent_id FROM daybook UNION SELECT agent_id FROM human_contact")}
            bodies = [r["body"] for r in await conn.fetch("SELECT body FROM human_contact")]
        assert seen == {"alice"} and bodies == ["private to alice"]
        async with ctx.write() as conn:
            changed = await conn.execute("UPDATE daybook SET entry = 'overwritten'")
            deleted = await conn.execute("DELETE FROM daybook WHERE entry = 'overwritten'")
        assert (changed, deleted) == ("UPDATE 1", "DELETE 1")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            async with ctx.write() as conn:
                await daybook.append(conn, agent_id="bob", wake_id=None, entry="written into bob", written_at=T0)
        # the harness's own connection reads every agent: bob's rows are as they were
        async with st.pg_conn() as conn:
            rows = {(r["agent_id"], r["entry"]) for r in await conn.fetch("SELECT agent_id, entry FROM daybook")}
            messages = {r["agent_id"] for r in await conn.fetch("SELECT agent_id FROM human_contact")}
        assert rows == {("bob", "bob's day")}
        assert messages == {"alice", "bob"}  # human messages are the control plane: no tool deletes one
        # bob's wake next sees bob's rows only: its connections log in as bob's role, which is the scope
        async with wake_ctx(config, st, T0, agent_id="bob", tier="whisper").read() as conn:
            assert {r["agent_id"] for r in await conn.fetch("SELECT agent_id FROM daybook")} == {"bob"}
            assert await scope.scoped_agent(conn) == "bob"
        async with st.pg_conn() as conn:
            assert await scope.scoped_agent(conn) is None  # the harness's login is no agent's


async def test_the_tools_sql_cannot_unbind_its_agent(config: Config) -> None:
    async with stores.connected(config, neo4j=False) as st:
        await _seed(st)
        ctx = wake_ctx(config, st, T0, agent_id="alice", tier="whisper")
        async with ctx.read() as conn:
            await conn.execute("RESET ROLE")  # back to the login role: the tool role itself
            await conn.execute("RESET ALL")
            await conn.execute("SET app.agent = 'bob'")
            assert {r["agent_id"] for r in await conn.fetch("SELECT agent_id FROM daybook")} == {"alice"}
            role = await conn.fetchrow(
                "SELECT rolsuper, rolbypassrls, rolcreaterole, (SELECT count(*) FROM pg_class WHERE relowner = r.oid) AS owns"
                " FROM pg_roles r WHERE rolname = current_user"
            )
            assert role is not None and dict(role) == {"rolsuper": False, "rolbypassrls": False, "rolcreaterole": False, "owns": 0}
            for sql in ("UPDATE wake_tool_login SET scoped_agent = 'bob'", "DELETE FROM wake_tool_login",
                        "INSERT INTO wake_tool_login VALUES (session_user, 'x', 'bob')", "RESET ROLE; SET ROLE postgres",
                        "SELECT * FROM wake_tool_login", "SET ROLE postgres",
                        "SET SESSION AUTHORIZATION postgres", "ALTER TABLE daybook DISABLE ROW LEVEL SECURITY"):
                with pytest.raises(asyncpg.PostgresError):
                    async with conn.transaction():
                        await conn.execute(sql)
            assert {r["agent_id"] for r in await conn.fetch("SELECT agent_id FROM human_contact")} == {"alice"}


async def test_every_agent_table_has_its_policy_and_no_other_table_is_granted(config: Config) -> None:
    async with stores.connected(config, neo4j=False) as st:
        async with wake_ctx(config, st, T0, agent_id="alice", tier="whisper").read() as conn:
            role = await conn.fetchval("SELECT current_user")
        async with st.pg_conn() as conn:
            assert await scope.unscoped_tables(conn) == []
            agent_tables = {r["table_name"] for r in await conn.fetch(
                "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'agent_id'")}
            # the agent's login role holds nothing itself: what it may do, it inherits from the tool role
            own = await conn.fetchval("SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = $1", role)
            granted = {r["table_name"] for r in await conn.fetch(
                "SELECT DISTINCT table_name FROM information_schema.role_table_grants WHERE grantee = $1", st.tools and st.tools.role)}
        assert own == 0 and len(agent_tables) > 20 and granted == agent_tables


async def test_a_login_that_may_not_create_roles_is_refused_by_migrate_in_one_line(pg_server_dsn: str) -> None:
    import urllib.parse
    import uuid

    from ledgers import schema

    name = f"wake_nocreaterole_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(pg_server_dsn)
    try:
        await admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'x' NOCREATEROLE NOSUPERUSER")
        await admin.execute(f"CREATE DATABASE {name} OWNER {name}")
        parts = urllib.parse.urlsplit(pg_server_dsn)
        conn = await asyncpg.connect(urllib.parse.urlunsplit(parts._replace(path=f"/{name}")), user=name, password="x")
        try:
            with pytest.raises(schema.SchemaMismatch, match=r"may create roles \(CREATEROLE\)$"):
                await schema.migrate(conn)
        finally:
            await conn.close()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.execute(f"DROP ROLE IF EXISTS {name}")
        await admin.close()


async def test_a_database_set_up_with_pid_bindings_is_scoped_by_login_after_the_setup(config: Config) -> None:
    """Before issue 46 a backend's pid was bound to its agent (`wake_scope`) and `wake_tool_login`
    did not name the agent. The setup drops the bindings; an existing login sees nothing until
    `enter` names its agent (fail closed), then its own rows."""
    async with stores.connected(config, neo4j=False) as st:
        await _seed(st)
        async with st.pg_conn() as conn:
            await scope.setup(conn)  # this database's tool role (its name follows the database's)
            role, _ = await scope.enter(conn, "alice")
            await conn.execute("ALTER TABLE wake_tool_login DROP COLUMN scoped_agent")
            await conn.execute("CREATE UNLOGGED TABLE wake_scope (pid integer PRIMARY KEY, agent_id text NOT NULL)")
            await conn.execute("CREATE OR REPLACE FUNCTION wake_scoped_agent() RETURNS text LANGUAGE sql STABLE SECURITY DEFINER"
                               " SET search_path = pg_catalog, pg_temp AS 'SELECT agent_id FROM public.wake_scope WHERE pid = pg_backend_pid()'")
            await scope.setup(conn)
            assert await conn.fetchval("SELECT to_regclass('wake_scope')") is None
            assert await conn.fetchval("SELECT scoped_agent FROM wake_tool_login WHERE role_name = $1", role) is None
            password = await conn.fetchval("SELECT password FROM wake_tool_login WHERE role_name = $1", role)
        assert st.tools is not None
        unnamed = await asyncpg.connect(st.tools.dsn, user=role, password=password)
        try:
            assert await unnamed.fetch("SELECT agent_id FROM daybook") == []  # no agent named: no rows
        finally:
            await unnamed.close()
        async with wake_ctx(config, st, T0, agent_id="alice", tier="whisper").read() as conn:  # the pool's first use names it
            assert {r["agent_id"] for r in await conn.fetch("SELECT agent_id FROM daybook")} == {"alice"}
            assert await conn.fetchval("SELECT current_user") == role
