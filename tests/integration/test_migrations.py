"""Migrations: applied once under the lock, the schema the code expects, newer schemas refused."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import asyncpg
import pytest

from ledgers import queries, schema
from ledgers.errors import SchemaMismatch
from tests.support import pooler as test_pooler

# The columns the code reads and writes, per table. A migration that drifts from these fails here.
EXPECTED_COLUMNS = {
    "schema_migrations": {"version", "name", "checksum", "applied_at"},
    "wake_introspection_ledger": {
        "wake_id", "agent_id", "tier", "trigger", "scheduled_for", "status", "started_at", "finished_at",
        "manifest_root", "blocks", "active_tools_count", "active_tool_names", "tool_hashes",
        "registry_tool_count", "fence", "host", "pid", "version", "config_hash", "diff", "note", "error",
        "model", "prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "turns", "tool_calls",
        "refusals", "stop_reason", "final_text", "escalation_cause", "unchecked_absence_claims", "chain_seq", "chain", "arrival_order",
        "peak_pressure", "transcript_root", "trace_id",
    },
    "manifest_contents": {"sha256", "kind", "body"},
    "agent_chain_heads": {"agent_id", "seq", "chain"},
    "wake_transcript": {"wake_id", "seq", "turn", "role", "sha256", "chars", "cut"},
    "wake_tool_calls": {"wake_id", "seq", "turn", "call_id", "tool", "arguments_sha256", "answer_seq", "outcome", "latency_ms"},
}


async def test_two_processes_migrating_at_once_apply_each_file_once(empty_pg_dsn: str) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, asyncpg, json
        from ledgers import schema
        async def main():
            conn = await asyncpg.connect({empty_pg_dsn!r}, statement_cache_size={0 if test_pooler.active() else 100})
            done = await schema.migrate(conn)
            print(json.dumps([m.version for m in done]))
            await conn.close()
        asyncio.run(main())
        """
    )
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", script, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outputs = [await p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1].decode() for o in outputs]
    applied = sorted(v for out, _ in outputs for v in __import__("json").loads(out))
    assert applied == [m.version for m in schema.available()]  # each file applied by exactly one process
    conn = await asyncpg.connect(empty_pg_dsn)
    try:
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations ORDER BY version")
        assert [(r["version"], r["checksum"]) for r in rows] == [(m.version, m.checksum) for m in schema.available()]
        assert await schema.check(conn) == schema.head()
    finally:
        await conn.close()


async def test_migrations_produce_the_schema_the_code_expects(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        for table, expected in EXPECTED_COLUMNS.items():
            rows = await conn.fetch("SELECT column_name FROM information_schema.columns WHERE table_name = $1", table)
            assert {r["column_name"] for r in rows} == expected, table
        # every named query the ledgers use prepares against the migrated schema
        for name, sql in queries.all_queries().items():
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:  # pragma: no cover - the failure message is the point
                pytest.fail(f"query {name} does not fit the schema: {exc}")
        assert queries.all_queries(), "no named queries found"
    finally:
        await conn.close()


async def test_schema_newer_than_the_code_is_refused(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'future', 'x')")
        with pytest.raises(SchemaMismatch, match="schema version 999, newer than this code knows"):
            await schema.check(conn)
        with pytest.raises(SchemaMismatch, match="newer than this code knows"):
            await schema.migrate(conn)
        states = await schema.status(conn)
        assert [s.version for s in states if not s.known] == [999]
    finally:
        await conn.close()


async def test_an_edited_applied_migration_is_detected(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
        with pytest.raises(SchemaMismatch, match="changed after it was applied"):
            await schema.check(conn)
    finally:
        await conn.close()


async def test_a_database_behind_is_reported_not_run(empty_pg_dsn: str) -> None:
    conn = await asyncpg.connect(empty_pg_dsn)
    try:
        with pytest.raises(SchemaMismatch, match="run `wake migrate`"):
            await schema.check(conn)
        assert [s.applied_at for s in await schema.status(conn)] == [None] * schema.head()
    finally:
        await conn.close()
