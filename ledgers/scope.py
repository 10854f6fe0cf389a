"""Agents scoped by the database: row-level security on every agent table, for the tool role.

The connections a tool or an arrival source reaches through `ToolContext.read()`/`.write()` log in
as this database's tool role (`wake_tool_<12 hex of md5(database name)>`): a login role of its own,
neither superuser nor owner of any table, NOBYPASSRLS, NOINHERIT, member of nothing. Every table
with an `agent_id` column has row-level security enabled and the policy `wake_agent_scope`:
a row is visible, and may be written, only when its `agent_id` is the agent bound to the backend.

The binding is a row `(backend pid, agent)` in `wake_scope`, which the harness writes from its own
(owner) connection before it hands the tool's connection over, and which the tool role can neither
read nor write. The policy reads it through `wake_scoped_agent()`, a SECURITY DEFINER function
with a fixed search path. Nothing a session can SET or RESET changes it: not a setting (a GUC such
as `app.agent` could be SET by the tool), not a role (SET ROLE / RESET ROLE return to the login
role, which is the tool role itself). docs/isolation.md says what this protects against and what
it cannot.

`setup` is idempotent and writes nothing when there is nothing to do. It runs after every
migration (`ledgers.schema.migrate`), so a table a later migration adds gets its policy and its
grant together; a process that opens tool connections runs it itself when `login` finds no tool
role. A table that has no policy gets no grant: an agent table the setup missed is refused to
tools (permission denied), never readable across agents.
"""

from __future__ import annotations

import asyncpg

from ledgers import queries

POLICY = "wake_agent_scope"
_sql = queries.named("harden")

# One DO block: a single round trip, under a transaction-level advisory lock (two processes
# setting up the same database at once would race on CREATE ROLE and CREATE POLICY).
SETUP = r"""
DO $scope$
DECLARE
    tool text := 'wake_tool_' || substr(md5(current_database()), 1, 12);
    pw text;
    fresh boolean := false;
    t record;
BEGIN
    PERFORM pg_advisory_xact_lock(2003266924);
    -- nothing below writes the catalog when everything is in place (the steady state)
    IF to_regclass('public.wake_scope') IS NULL THEN
        CREATE UNLOGGED TABLE public.wake_scope (pid integer PRIMARY KEY, agent_id text NOT NULL);
        REVOKE ALL ON public.wake_scope FROM PUBLIC;
    END IF;
    IF to_regclass('public.wake_tool_login') IS NULL THEN
        CREATE TABLE public.wake_tool_login (role_name text PRIMARY KEY, password text NOT NULL);
        REVOKE ALL ON public.wake_tool_login FROM PUBLIC;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                    WHERE n.nspname = 'public' AND p.proname = 'wake_scoped_agent') THEN
        CREATE FUNCTION public.wake_scoped_agent() RETURNS text
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
            AS 'SELECT agent_id FROM public.wake_scope WHERE pid = pg_backend_pid()';
    END IF;
    -- stale bindings of backends that are gone (a pid is bound again before it is used)
    DELETE FROM public.wake_scope WHERE pid NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL);

    SELECT password INTO pw FROM public.wake_tool_login WHERE role_name = tool;
    IF pw IS NULL THEN
        pw := replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
        INSERT INTO public.wake_tool_login (role_name, password) VALUES (tool, pw);
        fresh := true;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = tool) THEN
        EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS PASSWORD %L',
                       tool, pw);
    ELSIF fresh THEN
        EXECUTE format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS PASSWORD %L',
                       tool, pw);
    END IF;
    IF NOT has_schema_privilege(tool, 'public', 'USAGE') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', tool);
    END IF;
    IF NOT has_database_privilege(tool, current_database(), 'CONNECT') THEN
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), tool);
    END IF;

    FOR t IN SELECT c.oid::regclass AS rel, c.relrowsecurity AS secured
               FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'agent_id' AND NOT a.attisdropped
              WHERE c.relkind IN ('r', 'p') LOOP
        IF NOT t.secured THEN
            EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t.rel);
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = t.rel AND polname = 'wake_agent_scope') THEN
            EXECUTE format('CREATE POLICY wake_agent_scope ON %s USING (agent_id = (SELECT public.wake_scoped_agent()))'
                           ' WITH CHECK (agent_id = (SELECT public.wake_scoped_agent()))', t.rel);
        END IF;
        IF NOT (has_table_privilege(tool, t.rel, 'SELECT') AND has_table_privilege(tool, t.rel, 'INSERT')
                AND has_table_privilege(tool, t.rel, 'UPDATE') AND has_table_privilege(tool, t.rel, 'DELETE')) THEN
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %I', t.rel, tool);
        END IF;
    END LOOP;
    FOR t IN SELECT c.oid::regclass AS rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
              WHERE c.relkind = 'S' LOOP
        IF NOT has_sequence_privilege(tool, t.rel, 'USAGE') THEN
            EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %s TO %I', t.rel, tool);
        END IF;
    END LOOP;
END
$scope$
"""


async def setup(conn: asyncpg.Connection) -> tuple[str, str]:
    """Make sure the tool role, the binding table, and every agent table's policy and grants
    exist; returns the tool role's name and password. Needs an owner that may create roles."""
    async with conn.transaction():
        await conn.execute(SETUP)
        record = await conn.fetchrow(_sql("login"))
    assert record is not None
    return str(record["role_name"]), str(record["password"])


async def login(conn: asyncpg.Connection) -> tuple[str, str] | None:
    """The tool role's name and password when `setup` has run on this database (the migrations
    run it, so a process that migrated finds it at once); None otherwise. One query."""
    try:
        record = await conn.fetchrow(_sql("login"))
    except asyncpg.UndefinedTableError:
        return None
    return (str(record["role_name"]), str(record["password"])) if record is not None else None


async def bind(conn: asyncpg.Connection, pid: int, agent_id: str) -> None:
    """Bind backend `pid` (a tool connection) to `agent_id`; run on the harness's own connection."""
    await conn.execute(_sql("bind"), pid, agent_id)


async def unscoped_tables(conn: asyncpg.Connection) -> list[str]:
    """Agent tables that have no `wake_agent_scope` policy (empty once `setup` ran)."""
    return [str(r["relname"]) for r in await conn.fetch(_sql("unscoped_tables"))]


async def bound(conn: asyncpg.Connection, pid: int) -> str | None:
    """The agent backend `pid` is bound to, as the harness sees it; None when it is not bound."""
    value = await conn.fetchval(_sql("bound"), pid)
    return str(value) if value is not None else None
