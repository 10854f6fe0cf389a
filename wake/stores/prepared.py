"""The schema a command or a wake may run on: pending migrations applied when
`postgres.auto_migrate` is on, then the exact head required; the graph's constraints likewise.
Every command over the ledgers and every session prepares the stores this one way."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgers import schema
from ledgers.errors import SchemaMismatch
from wake import logs
from wake.errors import SchemaError

if TYPE_CHECKING:
    from wake.stores import Stores

log = logs.get("wake.session")  # the name these lines have always had


async def prepare_schema(st: Stores) -> None:
    """Apply pending migrations when `postgres.auto_migrate` is on; then require the exact head."""
    async with st.pg_conn() as conn:
        try:
            if st.config.postgres.auto_migrate:
                for m in await schema.migrate(conn):
                    log.info("schema.migrated", version=m.version, name=m.name)
            await schema.check(conn)
        except SchemaMismatch as exc:
            raise SchemaError(str(exc)) from exc
    g = st.graph
    if g is not None and st.config.postgres.auto_migrate:
        from ledgers import graph  # with a graph configured: a command without one never loads the graph ledger

        try:
            for name in await graph.ensure_schema(g):
                log.info("schema.graph_created", name=name)
        except graph.GraphUnavailable as exc:  # the graph block and tools will say so; the wake runs
            log.warning("schema.graph_unavailable", error=str(exc))
