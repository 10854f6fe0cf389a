"""The graph over a real Neo4j: the block, its caps and typed states, the tools, fenced writes, schema."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

import neo4j
import pytest
import structlog.testing

from ledgers import graph
from ledgers.errors import GraphStaleFence, StaleFence
from surfaces import graph_tools
from tests.support import ledger_ctx, marked, sessions, wakes
from wake import stores
from wake.arrival import graph as graph_block
from wake.arrival import sources
from wake.config import Config
from wake.run import cycle, session
from wake.stores import lease

FIXED_NOW = dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC)
GRAPH = [sources.BUILTIN["graph"]]
# A cold server's first queries can take over a second on a loaded machine; these tests are about
# what the block says, not about how fast it is.
PATIENT = {"WAKE_AGENTS__DEMO__TIERS__FULL__SOURCE_TIMEOUT_MS": "10000"}


def _neo4j(uri: str, **keys: Any) -> str:
    extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return f'[neo4j]\nuri = "{uri}"\n{extra}'


def _ctx(config: Config, st: stores.Stores, *, fence: int | None = None, now: dt.datetime = FIXED_NOW) -> cycle.WakeContext:
    return ledger_ctx.wake_ctx(config, st, now, tier="full", fence=fence)


def _w(now: dt.datetime = FIXED_NOW, fence: int | None = None, ref: str = "test") -> graph.Write:
    return graph.Write(agent_id="demo", fence=fence, now=now, wake_id=None, ref=ref)


def _cypher(uri: str, query: str, **params: Any) -> list[dict[str, Any]]:
    """Seed or inspect the graph directly (test data only)."""
    with neo4j.GraphDatabase.driver(uri, auth=None) as driver:
        records, _, _ = driver.execute_query(query, params)
        return [r.data() for r in records]


def _raw_link(
    uri: str, source: str, rel: str, target: str, at: dt.datetime, *, source_kind: str | None = None, target_kind: str | None = None
) -> None:
    _cypher(
        uri,
        "MERGE (s:Entity {agent_id: 'demo', name: $s}) SET s.kind = coalesce(s.kind, $sk) "
        "MERGE (t:Entity {agent_id: 'demo', name: $t}) SET t.kind = coalesce(t.kind, $tk) "
        "MERGE (s)-[r:$($rel)]->(t) SET r.created_at = $at",
        s=source, t=target, rel=rel, at=at, sk=source_kind, tk=target_kind,
    )


async def _block(config: Config, st: stores.Stores, now: dt.datetime = FIXED_NOW) -> Any:
    outcome = await wakes.run(config, st, session.build_registry(config), agent_id="demo", tier="full",
                                   now=lambda: now, source_list=GRAPH, dry_run=True)
    assert outcome.status == "completed", outcome.error
    block = outcome.blocks[0]
    assert len(block.text) <= config.neo4j.block_max_chars  # the block as the model reads it; the tests read its data plain
    return dataclasses.replace(block, text=marked.plain(block.text))


async def test_block_renders_the_anchors_and_one_hop_with_relationship_types(store_config: Callable[..., Config], neo4j_uri: str) -> None:
    config = store_config(_neo4j(neo4j_uri), **PATIENT)
    hour = dt.timedelta(hours=1)
    async with stores.connected(config) as st:
        g = st.graph
        assert g is not None
        await graph.anchor(g, _w(ref="fact:1"), "FACT", "Apollo", kind="project", at=FIXED_NOW - hour)
        await graph.anchor(g, _w(ref="commitment:7"), "COMMITMENT", "Quarterly report", kind="doc", at=FIXED_NOW - 2 * hour)
        await graph.anchor(g, _w(ref="commitment:3"), "COMMITMENT", "Old promise", kind="doc", at=FIXED_NOW, open_=False)
        await graph.anchor(g, _w(ref="fact:0"), "FACT", "Stale", kind="place", at=FIXED_NOW - 49 * hour)
        _raw_link(neo4j_uri, "Apollo", "DEPENDS_ON", "billing", FIXED_NOW - 3 * hour, target_kind="service")
        _raw_link(neo4j_uri, "Alice", "OWNS", "Apollo", FIXED_NOW - 4 * hour, source_kind="person")
        _raw_link(neo4j_uri, "Quarterly report", "ABOUT", "Apollo", FIXED_NOW - 5 * hour)
        _raw_link(neo4j_uri, "billing", "RUNS_ON", "two hops away", FIXED_NOW - 5 * hour)
        _raw_link(neo4j_uri, "Old promise", "ABOUT", "closed", FIXED_NOW - 5 * hour)
        block = await _block(config, st)
    assert (block.retrieval, block.result, block.rows, block.cache_tier.name) == ("ok", "present", 4, "stable")
    assert block.text == "\n".join([
        f"{graph_block.HEADER}; 4 of 4 entities shown:",
        "- Apollo (project): FACT, last 2026-11-29",
        "  -[DEPENDS_ON]-> billing (service)",
        "  <-[OWNS]- Alice (person)",
        "  <-[ABOUT]- Quarterly report (doc)",
        "- Quarterly report (doc): COMMITMENT, last 2026-11-29",  # its link to Apollo is shown once, above
    ])


async def test_block_caps_nodes_and_characters_with_exact_totals(store_config: Callable[..., Config], neo4j_uri: str) -> None:
    _cypher(neo4j_uri, "MERGE (a:Agent {id: 'demo'}) WITH a UNWIND range(1, 12) AS i "
            "MERGE (e:Entity {agent_id: 'demo', name: 'anchor-' + i}) MERGE (a)-[x:FACT {ref: 'f' + i}]->(e) "
            "SET x.at = $now - duration({minutes: i}) WITH e, i UNWIND range(1, 9) AS j "
            "MERGE (n:Entity {agent_id: 'demo', name: 'n-' + i + '-' + j, kind: 'thing'}) "
            "MERGE (e)-[r:MENTIONS]->(n) SET r.created_at = $now - duration({seconds: j})", now=FIXED_NOW)
    for max_nodes, max_chars in ((5, 2000), (20, 2000), (500, 600)):
        config = store_config(_neo4j(neo4j_uri, block_max_nodes=max_nodes, block_max_chars=max_chars), **PATIENT)
        async with stores.connected(config) as st:
            block = await _block(config, st)
        entity_lines = [line for line in block.text.splitlines() if line.startswith(("- ", "  "))]
        shown = {line.split(": ")[0].removeprefix("- ") if line.startswith("- ") else line.split("> ")[1].split(" (")[0] for line in entity_lines}
        assert block.rows == len(shown) <= max_nodes
        assert len(block.text) <= max_chars
        assert f"; {len(shown)} of 120 entities shown:" in block.text.splitlines()[0]  # 12 anchors + 108 neighbours, counted
        assert block.text.splitlines()[-1].startswith(f"… {120 - len(shown)} more entities")
        assert ("character cap" in block.text) == (max_chars == 600), block.text
        # newest anchor first, its newest link first
        assert entity_lines[:2] == ["- anchor-1: FACT, last 2026-11-29", "  -[MENTIONS]-> n-1-1 (thing)"]


async def test_block_is_empty_when_nothing_anchors_it_and_disabled_without_neo4j(store_config: Callable[..., Config], neo4j_uri: str) -> None:
    _raw_link(neo4j_uri, "a", "KNOWS", "b", FIXED_NOW)  # entities, but no anchor
    config = store_config(_neo4j(neo4j_uri), **PATIENT)
    async with stores.connected(config) as st:
        block = await _block(config, st)
    assert (block.retrieval, block.result, block.text) == ("ok", "empty", graph_block.EMPTY)
    config = store_config(**PATIENT)
    async with stores.connected(config) as st:
        block = await _block(config, st)
    assert (block.retrieval, block.result) == ("disabled", "unknown")
    assert block.text.startswith("disabled: neo4j is not configured")


async def test_tools_link_read_and_unlink(store_config: Callable[..., Config], neo4j_uri: str) -> None:
    config = store_config(_neo4j(neo4j_uri), **PATIENT)
    registry = session.build_registry(config)
    assert {"graph_neighbors", "graph_link", "graph_unlink"} <= {t.name for t in registry}
    assert {t.name for t in registry.binding(["wake.whisper"])} >= {"graph_neighbors"}
    assert not {"graph_link", "graph_unlink"} & {t.name for t in registry.binding(["wake.whisper"])}
    assert {"graph_link", "graph_unlink"} <= {t.name for t in registry.binding(["wake.surface"])}
    assert all(registry.get(n).mutates for n in ("graph_link", "graph_unlink")) and not registry.get("graph_neighbors").mutates
    assert "graph_neighbors" not in session.build_registry(store_config())  # no Neo4j, no graph tools
    async with stores.connected(config) as st:
        ctx = _ctx(config, st)
        link = registry.get("graph_link").handler
        assert await link(ctx, source="Alice", relation="WORKS_ON", target="Apollo", source_kind="person", target_kind="project") == {
            "linked": True, "created": True, "source": "Alice", "relation": "WORKS_ON", "target": "Apollo"}
        assert (await link(ctx, source="Alice", relation="WORKS_ON", target="Apollo"))["created"] is False
        await link(ctx, source="Bob", relation="MANAGES", target="Alice")
        found = await registry.get("graph_neighbors").handler(ctx, name="Alice")
        assert found["total"] == 2 and found["kind"] == "person"
        assert {(n["rel"], n["direction"], n["name"]) for n in found["neighbors"]} == {("WORKS_ON", "out", "Apollo"), ("MANAGES", "in", "Bob")}
        only = await registry.get("graph_neighbors").handler(ctx, name="Alice", relation="MANAGES")
        assert [n["name"] for n in only["neighbors"]] == ["Bob"] and only["total"] == 1
        assert (await registry.get("graph_neighbors").handler(ctx, name="Nobody"))["found"] is False
        bad = await link(ctx, source="Alice", relation="works on", target="Apollo")
        assert bad["error"].startswith("invalid argument: relation must be UPPER_SNAKE_CASE")
        unlink = registry.get("graph_unlink").handler
        assert (await unlink(ctx, source="Alice", relation="WORKS_ON", target="Apollo"))["removed"] == 1
        assert (await unlink(ctx, source="Alice", relation="WORKS_ON", target="Apollo"))["removed"] == 0
        assert (await registry.get("graph_neighbors").handler(ctx, name="Alice"))["total"] == 1
        # the entities the wake acted on anchor the next block (ACTION)
        block = await _block(config, st)
    assert "- Alice (person): ACTION, last 2026-11-29" in block.text
    assert "  <-[MANAGES]- Bob" in block.text


async def test_stale_fence_is_refused_and_writes_nothing(store_config: Callable[..., Config], neo4j_uri: str) -> None:
    config = store_config(_neo4j(neo4j_uri), **PATIENT)
    link = graph_tools.graph_link.handler
    async with sessions.ready_stores(config) as st:
        old = await lease.acquire(st, "demo", ttl_ms=5000)
        await st.redis.delete(lease.LEASE_KEY.format(agent="demo"))  # the old holder's lease expired
        new = await lease.acquire(st, "demo", ttl_ms=5000)
        with structlog.testing.capture_logs() as logged:
            refused = await link(_ctx(config, st, fence=old.fence), source="A", relation="KNOWS", target="B")
        assert refused["error"].startswith("refused, nothing was written: stale fence")
        assert any(e["event"] == "fence.stale" for e in logged)
        assert _cypher(neo4j_uri, "MATCH (n) RETURN count(n) AS n") == [{"n": 0}]
        assert (await link(_ctx(config, st, fence=new.fence), source="A", relation="KNOWS", target="B"))["created"] is True
        assert _cypher(neo4j_uri, "MATCH (f:Fence {agent_id: 'demo'}) RETURN f.fence AS fence") == [{"fence": new.fence}]

        # the graph's own fence node refuses an older fence even where PostgreSQL is not consulted
        g = st.graph
        assert g is not None
        with pytest.raises(GraphStaleFence) as caught:
            await graph.link(g, _w(fence=new.fence - 1), "C", "KNOWS", "D")
        assert isinstance(caught.value, StaleFence) and caught.value.newest == new.fence

        assert _cypher(neo4j_uri, "MATCH (e:Entity {name: 'C'}) RETURN count(e) AS n") == [{"n": 0}]
        await graph.link(g, _w(fence=new.fence + 1), "C", "KNOWS", "D")
        assert _cypher(neo4j_uri, "MATCH (f:Fence {agent_id: 'demo'}) RETURN f.fence AS fence") == [{"fence": new.fence + 1}]
        # PostgreSQL accepts the lease's fence, the graph has seen a newer one: the tool is refused
        with structlog.testing.capture_logs() as logged:
            refused = await link(_ctx(config, st, fence=new.fence), source="E", relation="KNOWS", target="F")
        assert refused["error"].startswith(f"refused, nothing was written: stale fence for agent 'demo': this wake holds {new.fence}")
        assert [e.get("store") for e in logged if e["event"] == "fence.stale"] == ["neo4j"]
        assert _cypher(neo4j_uri, "MATCH (e:Entity {name: 'E'}) RETURN count(e) AS n") == [{"n": 0}]
        await new.release()


async def test_server_stopped_mid_run_fails_the_block_and_the_tools_not_the_wake(
    store_config: Callable[..., Config], neo4j_dedicated: Callable[[], Any]
) -> None:
    server = neo4j_dedicated()
    # Generous timeouts (none is under test): a loaded machine may spend seconds before the first
    # query. The source's is above the driver's retry time, so the block keeps the server's own
    # reason; a stopped server refuses at once, so its reason is never a timeout.
    config = store_config(_neo4j(server.uri, timeout_s=30), WAKE_AGENTS__DEMO__TIERS__WHISPER__SOURCE_TIMEOUT_MS="60000")
    registry = session.build_registry(config)
    async with sessions.ready_stores(config) as st:
        ctx = _ctx(config, st)
        assert (await graph_tools.graph_link.handler(ctx, source="A", relation="KNOWS", target="B"))["created"] is True
        up = await wakes.run(config, st, registry, agent_id="demo", tier="whisper", now=lambda: FIXED_NOW)
        assert {b.name: b.result for b in up.blocks}["graph"] == "present"
        server.stop()
        down = await wakes.run(config, st, registry, agent_id="demo", tier="whisper", now=lambda: FIXED_NOW)
        assert down.status == "completed" and down.recorded, down.error
        block = {b.name: b for b in down.blocks}["graph"]
        assert (block.retrieval, block.result) == ("failed", "unknown")
        assert block.text == f"could not check: {block.reason}"
        assert block.reason and block.reason.startswith(f"GraphUnavailable: neo4j unreachable at {server.uri}: ServiceUnavailable"), block.reason
        assert {b.name: b.retrieval for b in down.blocks}["identity"] == "ok"
        for call in (graph_tools.graph_neighbors.handler(ctx, name="A"),
                     graph_tools.graph_link.handler(ctx, source="A", relation="KNOWS", target="C"),
                     graph_tools.graph_unlink.handler(ctx, source="A", relation="KNOWS", target="B")):
            answer = await call
            assert answer["error"].startswith("could not reach the graph: neo4j unreachable at"), answer


async def test_schema_is_created_idempotently(store_config: Callable[..., Config], neo4j_uri: str) -> None:
    for name in graph.schema_object_names():
        kind = "CONSTRAINT" if name in ("wake_agent_id", "wake_entity_key", "wake_fence_agent") else "INDEX"
        _cypher(neo4j_uri, f"DROP {kind} {name} IF EXISTS")
    config = store_config(_neo4j(neo4j_uri), **PATIENT)
    async with stores.connected(config) as st:
        g = st.graph
        assert g is not None
        assert await graph.schema_missing(g) == graph.schema_object_names()
        assert await graph.ensure_schema(g) == graph.schema_object_names()
        assert await graph.ensure_schema(g) == []
        assert await graph.schema_missing(g) == []
        await graph.link(g, _w(), "X", "KNOWS", "Y")
        with pytest.raises(neo4j.exceptions.ConstraintError):
            _cypher(neo4j_uri, "CREATE (:Entity {agent_id: 'demo', name: 'X'})")


def test_every_named_cypher_query_compiles(neo4j_uri: str) -> None:
    """EXPLAIN plans a query without running it: each named query parses against the server."""
    with neo4j.GraphDatabase.driver(neo4j_uri, auth=None, notifications_min_severity="OFF") as driver:
        for file in ("graph", "graph_schema"):
            for name, query in graph.load(file).items():
                if file == "graph_schema":
                    continue  # schema commands cannot be EXPLAINed; test_schema_is_created_idempotently runs them
                _, summary, _ = driver.execute_query("EXPLAIN " + query)
                assert summary.plan is not None, name
