"""The CLI with and without a real Neo4j: doctor, migrate, and a wake's graph block."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

CLI = Callable[..., subprocess.CompletedProcess[str]]


def test_doctor_reports_neo4j_with_latency_when_configured_and_disabled_when_not(
    wake_cli: CLI, pg_dsn: str, redis_url: str, neo4j_uri: str
) -> None:
    stores_env = {"DATABASE_URL": pg_dsn, "REDIS_URL": redis_url}
    done = wake_cli("doctor", "--json", extra_env={**stores_env, "NEO4J_URI": neo4j_uri})
    assert done.returncode == 0, done.stderr
    checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["neo4j"]["status"] == "ok" and checks["neo4j"]["latency_ms"] > 0
    assert checks["neo4j"]["detail"].startswith(f"{neo4j_uri} database neo4j (Neo4j/5.26")
    assert checks["graph_schema"]["status"] in ("ok", "warn")
    table = wake_cli("doctor", extra_env={**stores_env, "NEO4J_URI": neo4j_uri})
    neo_row = next(line for line in table.stdout.splitlines() if line.startswith("neo4j "))
    assert neo_row.split()[1] == "ok" and neo_row.split()[3] == "ms"

    done = wake_cli("doctor", "--json", extra_env=stores_env)
    assert done.returncode == 0, done.stderr
    checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["neo4j"]["status"] == "disabled" and checks["neo4j"]["latency_ms"] is None
    assert "graph_schema" not in checks


def test_migrate_covers_the_graph_and_a_wake_shows_the_graph_block(wake_cli: CLI, pg_dsn: str, redis_url: str, neo4j_uri: str) -> None:
    env = {"DATABASE_URL": pg_dsn, "REDIS_URL": redis_url, "NEO4J_URI": neo4j_uri}
    first = wake_cli("migrate", extra_env=env)
    assert first.returncode == 0, first.stderr
    assert f"graph schema on neo4j {neo4j_uri} database neo4j: 4 constraints and indexes ensured" in first.stdout
    again = wake_cli("migrate", extra_env=env)
    assert again.returncode == 0 and "ensured (nothing to create)" in again.stdout, again.stdout
    status = wake_cli("migrate", "--status", extra_env=env)
    assert status.stdout.splitlines()[-1] == f"graph schema on neo4j {neo4j_uri} database neo4j: 4 of 4 constraints and indexes (all present)"
    without = wake_cli("migrate", extra_env={"DATABASE_URL": pg_dsn, "REDIS_URL": redis_url})
    assert without.stdout.splitlines()[-1] == "graph: neo4j is not configured; no graph schema"

    # a cold server's first query can take over a second on a loaded machine, and past the graph's
    # default 5 s call timeout at load 20 (measured): generous bounds on both
    slow = {"WAKE_AGENTS__DEMO__TIERS__WHISPER__SOURCE_TIMEOUT_MS": "60000", "WAKE_NEO4J__TIMEOUT_S": "60"}
    woke = wake_cli("up", "--tier", "whisper", "--json", extra_env={**env, **slow})
    assert woke.returncode == 0, woke.stderr
    out = json.loads(woke.stdout)
    blocks = {b["name"]: b for b in out["blocks"]}
    graph = blocks["graph"]
    assert (graph["retrieval"], graph["result"], graph["cache_tier"]) == ("ok", "empty", "stable"), json.dumps(graph) + woke.stderr[-3000:]
    assert "graph_neighbors" in out["tools"] and "graph_link" not in out["tools"]  # whisper reads, surface writes

    woke = wake_cli("up", "--tier", "whisper", "--json", extra_env={"DATABASE_URL": pg_dsn, "REDIS_URL": redis_url})
    out = json.loads(woke.stdout)
    assert {b["name"]: b["retrieval"] for b in out["blocks"]}["graph"] == "disabled"
    assert "graph_neighbors" not in out["tools"]
    assert out["diff"]["agent"]["tools"]["removed"] == ["graph_neighbors"]  # the agent is told its hands changed
