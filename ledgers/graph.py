"""The agent's entity graph in Neo4j: named Cypher queries, fenced writes, the schema.

The model (docs/graph.md): `(:Agent {id})` anchors `(:Entity {agent_id, name, kind})` through
`FACT`, `COMMITMENT` (with `open`) and `ACTION` relationships (each with `at` and `ref`); entities
link to each other by any upper-snake-case relationship type; `(:Fence {agent_id, fence})` is the
graph's own fence. Cypher lives in `ledgers/cypher/*.cypher` as `// name: x` sections.

Every write runs in one transaction whose first statement is the `fence` query: it refuses (and
rolls back) a write whose fence is older than the newest fence the graph has seen for that agent,
raising `ledgers.errors.StaleFence`. An unreachable server, an expired session or a timeout
raises `GraphUnavailable` with the reason.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from ledgers.errors import GraphStaleFence
from ledgers.errors import GraphUnavailable as GraphUnavailable

if TYPE_CHECKING:  # the driver is imported when a graph is used, not by every command that may open one
    import neo4j

from ledgers import queries

CYPHER_DIR = Path(__file__).resolve().parent / "cypher"
_NAME = re.compile(r"^//\s*name:\s*(\w+)\s*$", re.MULTILINE)

# A relationship type between entities: upper snake case, like Neo4j's own convention.
RELATION = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
ANCHOR_ROLES: tuple[str, ...] = ("FACT", "COMMITMENT", "ACTION")
MAX_NAME_CHARS = 200
T = TypeVar("T")


@functools.cache
def load(file: str) -> dict[str, str]:
    """The named queries of `ledgers/cypher/<file>.cypher`."""
    return queries.split_named((CYPHER_DIR / f"{file}.cypher").read_text(encoding="utf-8"), _NAME, f"{file}.cypher")


def _q(name: str) -> str:
    return load("graph")[name]


def _native(value: object) -> object:
    """neo4j.time values become datetime ones; lists are walked."""
    if isinstance(value, list):
        return [_native(v) for v in value]
    to_native = getattr(value, "to_native", None)
    return to_native() if callable(to_native) else value


def _unavailable() -> tuple[type[BaseException], ...]:
    """What a Neo4j call raises when the server is unreachable or gone."""
    import neo4j.exceptions

    e = neo4j.exceptions
    return (e.ServiceUnavailable, e.SessionExpired, e.DriverError, e.TransientError, OSError)


@dataclass(frozen=True, kw_only=True)
class Graph:
    """The driver, the database named on every call, and the timeout of every call."""

    driver: neo4j.AsyncDriver
    database: str
    timeout_s: float
    address: str

    async def _guard(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run `call` within the timeout; unreachable and timed-out become `GraphUnavailable`."""
        import neo4j.exceptions

        try:
            async with asyncio.timeout(self.timeout_s):
                return await call()
        except TimeoutError as exc:
            raise GraphUnavailable(self.address, f"timed out after {self.timeout_s}s") from exc
        except neo4j.exceptions.ClientError as exc:
            if "TransactionTimedOut" in (exc.code or ""):
                raise GraphUnavailable(self.address, f"timed out after {self.timeout_s}s (server)") from exc
            raise
        except _unavailable() as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise GraphUnavailable(self.address, f"{type(exc).__name__}: {text}".rstrip(": ")) from exc

    async def read(self, query: str, **params: object) -> list[dict[str, Any]]:
        """The rows of one named read, their neo4j.time values as datetimes. Rows as mappings,
        not records: each Cypher query returns its own shape, which the function that runs it
        (`view`, `neighbors`...) reads into its own record or answer."""
        import neo4j

        result = await self._guard(lambda: self.driver.execute_query(
            neo4j.Query(_q(query), timeout=self.timeout_s), params, database_=self.database, routing_=neo4j.RoutingControl.READ,
        ))
        records: list[Any] = result.records
        return [{k: _native(v) for k, v in r.items()} for r in records]

    async def write(self, query: str, *, agent_id: str, fence: int | None, now: dt.datetime, **params: object) -> list[dict[str, Any]]:
        """Run one named write in a transaction fenced by the agent's Fence node; its rows as `read`
        returns them (mappings, for the same reason).

        `fence=None` (no lease held: a dry run, a test) writes unfenced, as `wake.stores.lease.fenced` does.
        """
        import neo4j

        @neo4j.unit_of_work(timeout=self.timeout_s)
        async def work(tx: Any) -> list[object]:
            if fence is not None:
                record = await (await tx.run(_q("fence"), agent_id=agent_id, fence=fence, now=now)).single()
                newest = int(record["newest"])
                if newest > fence:
                    raise GraphStaleFence(agent_id, fence, newest)  # raised inside: the transaction rolls back
            result = await tx.run(_q(query), {**params, "agent_id": agent_id, "fence": fence, "now": now})
            return [r async for r in result]

        async def call() -> list[Any]:
            async with self.driver.session(database=self.database) as session:
                return list(await session.execute_write(work))

        return [{k: _native(v) for k, v in r.items()} for r in await self._guard(call)]

    async def run_schema(self, statement: str) -> None:
        import neo4j

        async def call() -> None:
            await self.driver.execute_query(neo4j.Query(statement, timeout=self.timeout_s), database_=self.database)

        await self._guard(call)

    async def show_schema(self) -> set[str]:
        import neo4j

        async def call() -> set[str]:
            names: set[str] = set()
            for show in ("SHOW CONSTRAINTS YIELD name", "SHOW INDEXES YIELD name"):
                records, _, _ = await self.driver.execute_query(show, database_=self.database, routing_=neo4j.RoutingControl.READ)
                names.update(r["name"] for r in records)
            return names

        return await self._guard(call)


def on(driver: neo4j.AsyncDriver, *, database: str, timeout_s: float, address: str) -> Graph:
    """The graph behind `driver`, in `database`, every query under `timeout_s`."""
    return Graph(driver=driver, database=database, timeout_s=timeout_s, address=address)


# -- schema ------------------------------------------------------------------------------------


def schema_statements() -> dict[str, str]:
    return load("graph_schema")


def schema_object_names() -> list[str]:
    """The constraints and indexes the schema creates (each section is named after its object)."""
    return list(schema_statements())


async def ensure_schema(graph: Graph) -> list[str]:
    """Create every constraint and index that is missing (idempotent); returns those created."""
    missing = await schema_missing(graph)
    for statement in schema_statements().values():
        await graph.run_schema(statement)
    return missing


async def schema_missing(graph: Graph) -> list[str]:
    present = await graph.show_schema()
    return [n for n in schema_object_names() if n not in present]


# -- the block's view --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Edge:
    anchor: str
    rel: str
    outgoing: bool
    name: str
    kind: str | None


@dataclass(frozen=True, kw_only=True)
class Anchor:
    name: str
    kind: str | None
    roles: tuple[str, ...]
    last: dt.datetime | None


@dataclass(frozen=True, kw_only=True)
class View:
    anchors: list[Anchor]
    edges: list[Edge]
    anchor_total: int
    neighbour_total: int


async def view(graph: Graph, agent_id: str, *, since: dt.datetime, max_anchors: int, max_edges: int) -> View:
    """The anchors (newest first) and their one-hop links, with exact totals from COUNT."""
    anchors = [
        Anchor(name=r["name"], kind=r["kind"], roles=tuple(sorted(r["roles"], key=ANCHOR_ROLES.index)), last=r["last"])
        for r in await graph.read("anchors", agent_id=agent_id, since=since, limit=max_anchors)
    ]
    if not anchors:
        return View(anchors=[], edges=[], anchor_total=0, neighbour_total=0)
    around, counts = await asyncio.gather(
        graph.read("around", agent_id=agent_id, names=[a.name for a in anchors], limit=max_edges),
        graph.read("view_count", agent_id=agent_id, since=since),
    )
    edges = [Edge(anchor=r["anchor"], rel=r["rel"], outgoing=bool(r["outgoing"]), name=r["name"], kind=r["kind"]) for r in around]
    total = counts[0] if counts else {"anchors": 0, "neighbours": 0}
    return View(anchors=anchors, edges=edges, anchor_total=int(total["anchors"]), neighbour_total=int(total["neighbours"]))


# -- tools' reads and writes -------------------------------------------------------------------


def entity_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty entity name")
    name = value.strip()
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    return name


def relation(value: object) -> str:
    if not isinstance(value, str) or not RELATION.match(value):
        raise ValueError(f"relation must be UPPER_SNAKE_CASE (e.g. WORKS_ON), got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class Neighbor:
    """One relationship of the entity: `outgoing` when the entity is its source."""

    rel: str
    outgoing: bool
    name: str
    kind: str | None
    since: dt.datetime | None


@dataclass(frozen=True, kw_only=True)
class Neighbors:
    """An entity's one-hop links (at most the limit, newest first) and their exact total; `found`
    False (and `kind` None) when the graph has no such entity."""

    entity: str
    found: bool
    kind: str | None
    total: int
    neighbors: tuple[Neighbor, ...]


async def neighbors(graph: Graph, agent_id: str, name: str, *, rel: str | None, limit: int) -> Neighbors:
    name = entity_name(name, "name")
    rel = relation(rel) if rel is not None else None
    found = await graph.read("entity", agent_id=agent_id, name=name)
    if not found:
        return Neighbors(entity=name, found=False, kind=None, total=0, neighbors=())
    links, counted = await asyncio.gather(
        graph.read("neighbors", agent_id=agent_id, name=name, rel=rel, limit=limit),
        graph.read("neighbor_count", agent_id=agent_id, name=name, rel=rel),
    )
    return Neighbors(
        entity=name, found=True, kind=found[0]["kind"], total=int(counted[0]["total"]),
        neighbors=tuple(Neighbor(rel=r["rel"], outgoing=bool(r["outgoing"]), name=r["name"], kind=r["kind"], since=r["at"]) for r in links),
    )


@dataclass(frozen=True, kw_only=True)
class Write:
    agent_id: str
    fence: int | None
    now: dt.datetime
    wake_id: uuid.UUID | None
    ref: str

    def params(self) -> FenceParams:
        return {"agent_id": self.agent_id, "fence": self.fence, "now": self.now}


class FenceParams(TypedDict):
    """What every fenced write passes `Graph.write` beside its own parameters."""

    agent_id: str
    fence: int | None
    now: dt.datetime


def refused() -> type[Exception]:
    """What Neo4j raises when it refuses a query (for an `except` clause: imported only when one is raised)."""
    import neo4j.exceptions

    return neo4j.exceptions.Neo4jError


def refusal(exc: Exception) -> str:
    """How a tool tells the model that Neo4j refused its query (a `refused()` error)."""
    return f"the graph refused the query: {getattr(exc, 'code', None)}: {getattr(exc, 'message', None) or exc}"


async def link(
    graph: Graph, w: Write, source: str, rel: str, target: str, *, source_kind: str | None = None, target_kind: str | None = None
) -> bool:
    """Link two entities (created when missing); True when the relationship is new."""
    rows = await graph.write(
        "link", **w.params(), source=entity_name(source, "source"), rel=relation(rel), target=entity_name(target, "target"),
        source_kind=source_kind, target_kind=target_kind, wake_id=str(w.wake_id) if w.wake_id else None, ref=w.ref,
    )
    return bool(rows and rows[0]["created"])


async def unlink(graph: Graph, w: Write, source: str, rel: str, target: str) -> int:
    """Delete the relationship (never the entities); the number deleted."""
    rows = await graph.write(
        "unlink", **w.params(), source=entity_name(source, "source"), rel=relation(rel), target=entity_name(target, "target"), ref=w.ref,
    )
    return int(rows[0]["removed"]) if rows else 0


async def anchor(
    graph: Graph, w: Write, role: str, name: str, *, kind: str | None = None, at: dt.datetime | None = None, open_: bool = True
) -> None:
    """Mark an entity as the subject of a fact, a commitment (open or closed) or an action; other
    ledgers call this when they write, with `w.ref` naming their row."""
    if role not in ANCHOR_ROLES:
        raise ValueError(f"role must be one of {', '.join(ANCHOR_ROLES)}, got {role!r}")
    await graph.write("anchor", **w.params(), role=role, name=entity_name(name, "name"), kind=kind, at=at or w.now, ref=w.ref, open=open_)


async def close_commitment(graph: Graph, w: Write) -> list[str]:
    """Set `open = false` on the COMMITMENT anchors whose ref is `w.ref`; the entities' names."""
    return [r["name"] for r in await graph.write("close_commitment", **w.params(), ref=w.ref)]


async def fact_subject(graph: Graph, agent_id: str, ref: str) -> tuple[str, str | None] | None:
    """(name, kind) of the entity the fact row `ref` anchors, or None."""
    rows = await graph.read("fact_anchor", agent_id=agent_id, ref=ref)
    return (rows[0]["name"], rows[0]["kind"]) if rows else None
