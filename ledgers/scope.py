"""Agents scoped by the database: row-level security on every agent table, two planes, and a login
role per agent, for tool code.

The connections a tool or an arrival source reaches through `ToolContext.read()`/`.write()` log in
as its agent's role (`wake_tool_<12 hex of md5(database)>_<12 hex of md5(agent)>`): a login role of
its own, neither superuser nor owner of any table, NOBYPASSRLS, member only of the database's tool
role (`wake_tool_<12 hex>`, NOLOGIN), whose privileges it inherits and which it may not SET ROLE
to. Two agents' tools therefore run as two roles: neither sees the other's query text in
`pg_stat_activity` nor may signal the other's backend (PostgreSQL allows both only to a role with
the privileges of the backend's role).

Every table with an `agent_id` column has row-level security enabled and the policy
`wake_agent_scope`: a row is visible, and may be written, only when its `agent_id` is the agent
whose role the session logged in as. The login names its agent in `wake_tool_login`, which the
harness writes when it makes the role and which the tool role can neither read nor write; the
policy reads it through `wake_scoped_agent()`, a SECURITY DEFINER function with a fixed search
path, by `session_user`. Nothing is bound per backend, so a pooler in transaction mode, which runs
each transaction on whichever server connection of that role is free, changes nothing.

What the tool role may do to each table is decided table by table in `PLANES` (docs/isolation.md
shows the same table): the *data plane*, which a tool writes for its own agent, and the *control
plane* (approvals, pauses, one-shots, findings, human messages, fences, slots, the outbox, the
ledger rows and the chain), which only the harness's login writes: the tool role may read its
agent's rows there and write none. A table of the operator's own with an `agent_id` column (docs/tools.md)
is on the data plane, under its policy; wake's own tables each have a decision, and
`tests/integration/test_control_plane.py` fails on one that has none.

`setup` is idempotent and writes nothing when there is nothing to do. It runs after every
migration (`ledgers.schema.migrate`), so a table a later migration adds gets its policy and its
grants together; a process that opens tool connections runs it itself when `login` finds no tool
role. `enter` makes an agent's role on first use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import asyncpg

from ledgers import queries

POLICY = "wake_agent_scope"
_sql = queries.named("harden")

ALL = ("SELECT", "INSERT", "UPDATE", "DELETE")


@dataclass(frozen=True)
class Plane:
    """The tool role's privileges on one table, and why. `grants` are GRANT clauses: a privilege
    (`SELECT`) or a column privilege (`UPDATE (agent_id)`)."""

    plane: str  # 'data', 'control', or 'none' (no agent's rows: not granted at all)
    grants: tuple[str, ...]
    reason: str


def _data(reason: str) -> Plane:
    return Plane("data", ALL, reason)


def _control(reason: str, *extra: str) -> Plane:
    return Plane("control", ("SELECT", *extra), reason)


def _none(reason: str) -> Plane:
    return Plane("none", (), reason)


# Every table of the schema, decided. A new table needs a line here (and in docs/isolation.md).
PLANES: dict[str, Plane] = {
    # the data plane: what the agent keeps for itself through its tools
    "facts": _data("the agent's facts (`fact_add`, `fact_supersede`); `saw` facts cite a human message it cannot write"),
    "daybook": _data("the agent's own daybook (`daybook_append`)"),
    "commitments": _data("the agent's commitments (`commitment_add`, `commitment_complete`)"),
    "settled_state": _data("what the agent settled about its days"),
    "living_summaries": _data("the agent's living summaries (`summary_fold`)"),
    "living_summary_trail": _data("their trail, written with them"),
    "retraction_ledger": _data("the agent's retractions and their falsifiers (`retract`)"),
    "claim_probe_records": _data("the probes its tools run (`probe`, falsifiers)"),
    "memory_writes": _data("the ledger of its memory tools' commits (`memory_write`, `memory_append`)"),
    "conversation_archive": _data("what its context compaction archived"),
    # the control plane: the operator's, the humans' and the harness's; the tool reads its agent's rows
    "tool_approvals": _control("calls waiting for an operator and the operator's decisions: an agent approving itself is no decision"),
    "human_contact": _control("human messages and the inbox: a `saw` fact's attestation cites them, so the agent may not write one"),
    "wake_pauses": _control("operator pauses (`wake pause`)"),
    "wake_oneshots": _control("one-shot wakes (`wake at`) and their claims"),
    "cloister_findings": _control("the memory audit's findings and the operator's acknowledgements"),
    "cloister_audits": _control("where the memory audit stopped"),
    "agent_fences": _control(
        "the lease fences; `UPDATE (agent_id)` only so that a fenced write can lock its fence row (`FOR SHARE` needs an UPDATE "
        "privilege), and the policy lets it set agent_id to nothing but its own agent", "UPDATE (agent_id)"),
    "wake_slots": _control("claimed schedule slots"),
    "wake_outbox": _control("deliveries the harness owes"),
    "wake_introspection_ledger": _control("the wakes' own rows: manifests, statuses, the hash chain"),
    "agent_chain_heads": _control("the chain's heads"),
    "chain_anchors": _control("timestamp tokens over the chain's heads: a tool that wrote one could vouch for a chain it rewrote"),
    "tool_flow_findings": _control("toxic-flow findings and the operator's acceptance of a flow"),
    "tool_flow_state": _control("the flow each tier's last binding held, which the binding diff compares with"),
    "wake_incidents": _control("incidents: a tier's failures grouped, their notices and the operator's acknowledgement"),
    # the harness's verdicts and its records of what it did (migration 0025): an agent that wrote them
    # would forge the harness's word, so they are written on the harness's login only
    "fact_checks": _control("the code check's verdicts on facts (the arrival's check, `wake facts --check`): a forged `refuted`"
                            " row would leave a fact out of the arrival unchecked, a `verified` one vouch for it on the console"),
    "last_actions": _control("confirmed actions: the model loop's record that a mutating call succeeded, shown as \"Confirmed"
                             " actions\" in the arrival; a tool that wrote one would confirm what never ran"),
    "wake_turns": _control("the context pressure the model loop measured before each call"),
    "context_events": _control("the context audit: the harness's narrowings, reminders and compactions, and the declines and"
                               " settings the agent's context tools asked for, written by the harness once it checked them"
                               " against the operator's bounds (a forged `config_set` would set a threshold past them)"),
    "wake_replays": _control("replays are the operator's trials of a change (`wake replay`, `wake eval`); a tool reads its agent's"),
    "wake_replay_evals": _control(
        "eval scorecards, one per agent of a `wake eval` run: the operator's verdict on a change; a tool reads its agent's"),
    "wake_replay_transcript": _none("a replay's transcript, no agent column; the operator's"),
    "wake_replay_tool_calls": _none("a replay's calls, no agent column; the operator's"),
    "wake_replay_contents": _none("a replay's content store, shared; the operator's"),
    # not granted: no agent column (nothing to scope by), or the scope's own machinery
    "manifest_contents": _none("content addressed, shared by every agent; the harness writes it"),
    "wake_transcript": _none("no agent column; the harness records it and `wake show` reads it"),
    "wake_tool_calls": _none("no agent column; the harness records it"),
    "mcp_tool_pins": _none("tool pins are the operator's, shared by every agent"),
    "mcp_tool_findings": _none("pin findings and their acceptance are the operator's"),
    "schema_migrations": _none("the schema's own record"),
    "wake_tool_login": _none("the agents' login roles, their passwords and the agent each is scoped to: the scope itself"),
    "wake_seal_key": _none("the key that seals operator decisions and human messages: a tool that read it could forge both"),
}

_NAME = re.compile(r"^[a-z_]+$")
_GRANT = re.compile(r"^(SELECT|INSERT|UPDATE|DELETE)( \([a-z_]+\))?$")


def _decisions() -> str:
    """`PLANES` as the VALUES list the setup compares each table's grants with (constants only)."""
    rows = []
    for name, plane in sorted(PLANES.items()):
        assert _NAME.match(name) and all(_GRANT.match(g) for g in plane.grants), name
        grants = ", ".join(f"'{g}'" for g in sorted(plane.grants))
        rows.append(f"('{name}', ARRAY[{grants}]::text[])")
    return ",\n            ".join(rows)


# The agent a session is scoped to: the agent whose login role the session logged in as. A SECURITY
# DEFINER function keeps `session_user` (the login, which no SQL of the tool's can change: SET
# SESSION AUTHORIZATION needs a superuser), and a pooler logs its server connections in as the
# client's own role, so a transaction sees its agent whichever server connection it runs on.
SCOPED_AGENT = "SELECT scoped_agent FROM public.wake_tool_login WHERE role_name = session_user::text"

# One DO block: a single round trip, under a transaction-level advisory lock (two processes
# setting up the same database at once would race on CREATE ROLE and CREATE POLICY).
SETUP = r"""
DO $scope$
DECLARE
    tool text := 'wake_tool_' || substr(md5(current_database()), 1, 12);
    tool_oid oid;
    g text;
    t record;
BEGIN
    PERFORM pg_advisory_xact_lock(2003266924);
    -- nothing below writes the catalog when everything is in place (the steady state)
    IF to_regclass('public.wake_tool_login') IS NULL THEN
        CREATE TABLE public.wake_tool_login (role_name text PRIMARY KEY, password text NOT NULL, scoped_agent text UNIQUE);
        REVOKE ALL ON public.wake_tool_login FROM PUBLIC;
    ELSIF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'public.wake_tool_login'::regclass AND attname = 'scoped_agent'
                                                  AND NOT attisdropped) THEN
        -- an older setup bound backends to agents by pid (`wake_scope`); `ENTER` fills the column (not
        -- named agent_id: this is no agent table, which would get the agents' policy)
        ALTER TABLE public.wake_tool_login ADD COLUMN scoped_agent text UNIQUE;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                    WHERE n.nspname = 'public' AND p.proname = 'wake_scoped_agent' AND p.prosrc = @SCOPED_AGENT@) THEN
        CREATE OR REPLACE FUNCTION public.wake_scoped_agent() RETURNS text
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
            AS @SCOPED_AGENT@;
    END IF;
    -- the older binding of backends to agents by pid: a pid is no session's own through a pooler
    IF to_regclass('public.wake_scope') IS NOT NULL THEN
        DROP TABLE public.wake_scope;
    END IF;

    -- the tool role: the privileges every agent's role inherits; nobody logs in as it
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = tool) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS', tool);
    ELSIF (SELECT rolcanlogin FROM pg_roles WHERE rolname = tool) THEN
        EXECUTE format('ALTER ROLE %I NOLOGIN PASSWORD NULL', tool);
        DELETE FROM public.wake_tool_login WHERE role_name = tool;
    END IF;
    SELECT oid INTO tool_oid FROM pg_roles WHERE rolname = tool;
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
    END LOOP;
    -- each table's privileges as PLANES decides them (an operator's agent table: the data plane); an agent
    -- table without its policy gets none either
    FOR t IN SELECT c.oid::regclass AS rel,
                    CASE WHEN a.attname IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid
                                                                        AND p.polname = 'wake_agent_scope')
                         THEN '{}'::text[]
                         -- an operator's own agent table (docs/tools.md), in no plane of wake's: the data plane
                         WHEN d.grants IS NULL AND a.attname IS NOT NULL THEN @OPERATOR_TABLE@
                         ELSE coalesce(d.grants, '{}'::text[]) END AS want,
                    coalesce((SELECT array_agg(x ORDER BY x COLLATE "C") FROM (
                        SELECT e.privilege_type AS x FROM aclexplode(c.relacl) e WHERE e.grantee = tool_oid
                        UNION ALL
                        SELECT e.privilege_type || ' (' || ca.attname || ')' FROM pg_attribute ca, aclexplode(ca.attacl) e
                         WHERE ca.attrelid = c.oid AND NOT ca.attisdropped AND e.grantee = tool_oid) s), '{}'::text[]) AS have
               FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
               LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'agent_id' AND NOT a.attisdropped
               LEFT JOIN (VALUES
            @DECISIONS@
               ) d(relname, grants) ON d.relname = c.relname::text
              WHERE c.relkind IN ('r', 'p') LOOP
        IF t.have IS DISTINCT FROM t.want THEN
            EXECUTE format('REVOKE ALL ON %s FROM %I', t.rel, tool);
            FOREACH g IN ARRAY t.want LOOP
                EXECUTE format('GRANT %s ON %s TO %I', g, t.rel, tool);
            END LOOP;
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
""".replace("@DECISIONS@", _decisions()).replace("@SCOPED_AGENT@", "'" + SCOPED_AGENT.replace("'", "''") + "'").replace(
    "@OPERATOR_TABLE@", "ARRAY[" + ", ".join(f"'{g}'" for g in sorted(ALL)) + "]::text[]")

# An agent's login role, made on first use: LOGIN, INHERIT, a member of the tool role (whose
# privileges it uses) without the right to SET ROLE to it, and of nothing else. Its agent comes in
# through the transaction's `wake.enter_agent` setting (a DO block takes no parameters).
ENTER = r"""
DO $enter$
DECLARE
    tool text := 'wake_tool_' || substr(md5(current_database()), 1, 12);
    agent text := current_setting('wake.enter_agent');
    member text := tool || '_' || substr(md5(agent), 1, 12);
    pw text;
    bound text;
    fresh boolean := false;
BEGIN
    PERFORM pg_advisory_xact_lock(2003266924);
    SELECT password, scoped_agent INTO pw, bound FROM public.wake_tool_login WHERE role_name = member;
    IF pw IS NULL THEN
        pw := replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
        INSERT INTO public.wake_tool_login (role_name, password, scoped_agent) VALUES (member, pw, agent);
        fresh := true;
    ELSIF bound IS NULL THEN  -- made by an older setup, before a login named its agent
        UPDATE public.wake_tool_login SET scoped_agent = agent WHERE role_name = member;
    ELSIF bound <> agent THEN
        RAISE EXCEPTION 'the tool login % is agent %''s, not %''s (their ids share an md5 prefix)', member, bound, agent;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = member) THEN
        EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT NOREPLICATION NOBYPASSRLS PASSWORD %L',
                       member, pw);
    ELSIF fresh THEN
        EXECUTE format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT NOREPLICATION NOBYPASSRLS PASSWORD %L',
                       member, pw);
    END IF;
    IF NOT pg_has_role(member, tool, 'USAGE') THEN
        IF current_setting('server_version_num')::integer >= 160000 THEN
            EXECUTE format('GRANT %I TO %I WITH INHERIT TRUE, SET FALSE', tool, member);
        ELSE
            EXECUTE format('GRANT %I TO %I', tool, member);
        END IF;
    END IF;
END
$enter$
"""


async def setup(conn: asyncpg.Connection) -> str:
    """Make sure the tool role, the binding table, every agent table's policy and every table's
    grants (`PLANES`) exist; returns the tool role's name. Needs an owner that may create roles."""
    async with conn.transaction():
        await conn.execute(SETUP)
        name = await conn.fetchval(_sql("tool_role"))
    return str(name)


async def login(conn: asyncpg.Connection) -> str | None:
    """The tool role's name when `setup` has run on this database (the migrations run it, so a
    process that migrated finds it at once); None otherwise. One query."""
    name = await conn.fetchval(_sql("tool_role"))
    return str(name) if name is not None else None


async def enter(conn: asyncpg.Connection, agent_id: str) -> tuple[str, str]:
    """`agent_id`'s login role and its password, made on first use (one query when it exists)."""
    record = await conn.fetchrow(_sql("agent_login"), agent_id)
    if record is None:
        async with conn.transaction():
            await conn.execute("SELECT set_config('wake.enter_agent', $1, true)", agent_id)
            await conn.execute(ENTER)
            record = await conn.fetchrow(_sql("agent_login"), agent_id)
    assert record is not None
    return str(record["role_name"]), str(record["password"])


async def unscoped_tables(conn: asyncpg.Connection) -> list[str]:
    """Agent tables that have no `wake_agent_scope` policy (empty once `setup` ran)."""
    return [str(r["relname"]) for r in await conn.fetch(_sql("unscoped_tables"))]


async def scoped_agent(conn: asyncpg.Connection) -> str | None:
    """The agent the session of `conn` is scoped to (its login role's); None for any other login."""
    value = await conn.fetchval(_sql("scoped_agent"))
    return str(value) if value is not None else None


async def privileges(conn: asyncpg.Connection) -> dict[str, tuple[str, ...]]:
    """Every table of the schema and what the tool role may do to it, as `PLANES` writes it (sorted
    GRANT clauses); the test of the planes compares the two."""
    return {str(r["relname"]): tuple(r["grants"]) for r in await conn.fetch(_sql("privileges"))}
