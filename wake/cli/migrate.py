"""The graph half of `wake migrate`: Neo4j's constraints and indexes (PostgreSQL's migrations are
`ledgers.schema`)."""

from __future__ import annotations

from ledgers import graph
from wake import stores
from wake.config import Config
from wake.errors import StoreUnavailable


async def graph_schema(config: Config, *, status_only: bool = False) -> str | None:
    """`wake migrate` for the graph: ensure the constraints and indexes (or, with `status_only`,
    report which are missing). None when Neo4j is not configured; StoreUnavailable when it is
    configured and unreachable."""
    if not config.neo4j.uri:
        return None
    driver = await stores.open_neo4j(config)
    try:
        g = graph.on(driver, database=config.neo4j.database, timeout_s=config.neo4j.timeout_s, address=stores.address(config.neo4j.uri))
        where = f"neo4j {g.address} database {g.database}"
        names = graph.schema_object_names()
        try:
            if status_only:
                missing = await graph.schema_missing(g)
                state = f"missing {', '.join(missing)}: run `wake migrate`" if missing else "all present"
                return f"graph schema on {where}: {len(names) - len(missing)} of {len(names)} constraints and indexes ({state})"
            created = await graph.ensure_schema(g)
        except graph.GraphUnavailable as exc:
            raise StoreUnavailable("neo4j", g.address, exc.reason) from exc
        done = f"created {', '.join(created)}" if created else "nothing to create"
        return f"graph schema on {where}: {len(names)} constraints and indexes ensured ({done})"
    finally:
        await driver.close()
