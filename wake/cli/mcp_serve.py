"""`wake mcp serve`: the ledgers of one agent, read-only, as an MCP server (the official `mcp` SDK).

A chat surface (Claude Desktop, any MCP client) learns from it what the autonomous wakes did
without becoming a second writer: recent wakes, one wake's record, arrival and transcript, the
binding diff, the open commitments, the canary's findings, the settled state. Every tool is
declared read-only (`readOnlyHint`), and every read runs in a `READ ONLY` PostgreSQL
transaction, so nothing reached through it can write.

One server process serves one agent (`--agent`, or the config's only agent), so every session of
it, over stdio or streamable HTTP, is scoped to that agent: a wake of another agent is answered as
not found. Transports: stdio (the default; logs go to stderr, stdout carries only JSON-RPC) and
streamable HTTP (`--listen HOST:PORT`, path `/mcp`; port 0 picks a free one, and the
`mcp.listening` log line names the URL).

Every stored string it answers with (a wake's note, error and final text, a commitment's title, a
finding's place, rule and excerpt, the settled state, the model's words and a call's arguments) is
marked data (`untrusted.spotlight`, the operator's marks `⟪data:…⟫`, named in the server's
instructions); an arrival block or a tool's answer, marked when the wake rendered it, keeps its
marks, its invisible and control characters escaped (`spotlight.terminal`).
"""

from __future__ import annotations

import contextlib
import enum
import json
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import asyncpg
import click

from ledgers import commitments, ids, introspection, memory_ledger, settled, transcripts
from ledgers.vocab import Status, Tier
from untrusted import spotlight
from wake import logs
from wake.cli import render
from wake.cli.app import Context, agent_option, default_agent, ledger_stores, pass_ctx, run_async
from wake.config import Config, parse_listen
from wake.daemon import listen_socket
from wake.stores import Stores

if TYPE_CHECKING:  # the SDK is imported by `wake mcp serve` alone (docs/performance.md: commands import what they use)
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

READ_ONLY = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True, "open_world_hint": False}
MAX_LIMIT = 200
FINDING_STATES = ("open", "acknowledged", "reverted", "logged", "all")


def _plain(value: object) -> Any:
    """A ledger value as plain JSON (times as ISO 8601, ids as text, money as numbers)."""
    return json.loads(render.to_json(value))


DATA = spotlight.OPERATOR
WAKE_TEXT = frozenset({"note", "error", "final_text", "escalation_cause"})
COMMITMENT_TEXT = frozenset({"title"})
FINDING_TEXT = frozenset({"domain", "path", "excerpt", "rule", "note", "acked_by"})
SETTLED_TEXT = frozenset({"subject", "state"})


def marked(row: Mapping[str, object], fields: frozenset[str]) -> dict[str, object]:
    """`row` with each of its `fields` that holds a string as one marked span."""
    return {k: DATA.span(v) if k in fields and isinstance(v, str) else v for k, v in row.items()}


class ShownBlock(TypedDict):
    """An arrival block as served: its name, and its text as stored (None where it is not)."""

    name: str
    text: str | None


def shown_arrival(blocks: list[tuple[str, str | None]]) -> list[ShownBlock]:
    """The blocks as stored (marked when the wake rendered them), their invisible and control characters escaped."""
    return [{"name": spotlight.neutral(n), "text": spotlight.terminal(t) if t is not None else None} for n, t in blocks]


def shown_transcript(t: Mapping[str, Any]) -> dict[str, object]:
    """A transcript (`transcripts.as_dict`) for a client: the model's words and every call's
    arguments marked data; what the model was sent (the harness's messages, the tools' answers,
    marked when sent) kept with its marks, its invisible and control characters escaped."""

    def text(role: str, content: object) -> object:
        if not isinstance(content, str):
            return content
        return DATA.span(content) if role == "assistant" else spotlight.terminal(content)

    def calls(tool_calls: object) -> object:
        if not isinstance(tool_calls, list):
            return tool_calls
        return [{**c, "function": {**c["function"], "name": spotlight.neutral(str(c["function"].get("name"))),
                                   "arguments": DATA.span(c["function"]["arguments"]) if isinstance(c["function"].get("arguments"), str)
                                   else c["function"].get("arguments")}}
                if isinstance(c, dict) and isinstance(c.get("function"), dict) else c for c in tool_calls]

    messages = [{**m, "content": text(str(m.get("role")), m.get("content")), **({"tool_calls": calls(m["tool_calls"])} if "tool_calls" in m else {})}
                for m in t["messages"]]
    shown_calls = [{**c, "tool": spotlight.neutral(str(c.get("tool"))),
                    "arguments": DATA.span(c["arguments"]) if isinstance(c.get("arguments"), str) else c.get("arguments"),
                    "answer": spotlight.terminal(c["answer"]) if isinstance(c.get("answer"), str) else c.get("answer")} for c in t["calls"]]
    return {**t, "messages": messages, "calls": shown_calls}


class Ledgers:
    """The reads the server offers, each in a read-only transaction, scoped to one agent."""

    def __init__(self, stores: Stores, agent_id: str) -> None:
        self.stores = stores
        self.agent_id = agent_id

    async def _wake(self, conn: asyncpg.Connection, wake_id: str) -> dict[str, Any]:
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            found = await introspection.resolve_id(conn, wake_id, self.agent_id)  # another agent's wakes are not matched
        except ids.IdLookupError as exc:
            raise ToolError(str(exc)) from exc
        row = await introspection.get(conn, found) if found is not None else None
        if row is None or row.agent_id != self.agent_id:  # another agent's wake is not this session's to see
            raise ToolError(f"agent {self.agent_id!r} has no wake {wake_id[:40]!r} (give a full id or a unique prefix)")
        return row.columns()

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection in a READ ONLY transaction: PostgreSQL refuses any write in it."""
        async with self.stores.pg_conn() as conn:
            tx = conn.transaction(readonly=True)
            await tx.start()
            try:
                yield conn
            finally:
                await tx.rollback()  # it wrote nothing; a rollback is the cheapest end

    async def recent_wakes(self, limit: int, tier: str | None, status: str | None) -> list[dict[str, object]]:
        _one_of("tier", tier, Tier)
        _one_of("status", status, Status)
        async with self._read() as conn:
            rows = await introspection.recent(conn, agent_id=self.agent_id, tier=tier, status=status, limit=_limit(limit))
        return [marked(r, WAKE_TEXT) for r in _plain(rows)]

    async def wake(self, wake_id: str) -> dict[str, object]:
        async with self._read() as conn:
            row = await self._wake(conn, wake_id)
        del row["blocks"], row["tool_hashes"]  # the arrival and the binding have their own tools
        return marked(_plain(row), WAKE_TEXT)

    async def arrival(self, wake_id: str) -> dict[str, Any]:
        async with self._read() as conn:
            row = await self._wake(conn, wake_id)
            blocks = await introspection.arrival(conn, row["wake_id"])
        return {"wake_id": str(row["wake_id"]), "tier": row["tier"], "blocks": shown_arrival(blocks)}

    async def transcript(self, wake_id: str) -> dict[str, object]:
        return shown_transcript(await self.stored_transcript(wake_id))

    async def stored_transcript(self, wake_id: str) -> dict[str, object]:
        """The transcript as stored, for `render.transcript` (which marks it as the CLI does)."""
        async with self._read() as conn:
            row = await self._wake(conn, wake_id)
            stored = await transcripts.read(conn, row["wake_id"])
        return dict(_plain(transcripts.as_dict(stored, row)))

    async def binding_diff(self, wake_id: str | None) -> dict[str, object]:
        async with self._read() as conn:
            if wake_id is None:
                newest = await introspection.last_two(conn, self.agent_id)
                if not newest:
                    return {"wake_id": None, "diff": None, "tools_bound": []}
                wake_id = str(newest[0])
            row = await self._wake(conn, wake_id)
        return {"wake_id": str(row["wake_id"]), "tier": row["tier"], "tools_bound": row["active_tool_names"], "diff": _plain(row["diff"])}

    async def open_commitments(self, limit: int) -> dict[str, object]:
        async with self._read() as conn:
            rows, total = await commitments.open_newest(conn, self.agent_id, limit=_limit(limit))
        return {"total": total, "shown": len(rows), "rows": [marked(r, COMMITMENT_TEXT) for r in _plain(rows)]}

    async def findings(self, state: str, limit: int) -> dict[str, object]:
        from mcp.server.mcpserver.exceptions import ToolError

        if state not in FINDING_STATES:
            raise ToolError(f"state must be one of {', '.join(FINDING_STATES)}, got {state[:40]!r}")
        async with self._read() as conn:
            rows, total = await memory_ledger.findings(conn, self.agent_id, state=None if state == "all" else state, limit=_limit(limit))
        return {"state": state, "total": total, "shown": len(rows), "rows": [marked(r, FINDING_TEXT) for r in _plain(rows)]}

    async def settled_state(self) -> dict[str, object]:
        async with self._read() as conn:
            row = await settled.latest_state(conn, self.agent_id)
        plain = _plain(row)
        return {"agent": self.agent_id, "settled": marked(plain, SETTLED_TEXT) if plain is not None else None}


def _one_of(name: str, value: str | None, vocab: type[enum.StrEnum]) -> None:
    """A filter the ledger can match, or a ToolError naming the choices (never the driver's error)."""
    from mcp.server.mcpserver.exceptions import ToolError

    if value is not None and value not in {v.value for v in vocab}:
        raise ToolError(f"{name} must be one of {', '.join(v.value for v in vocab)}, got {value[:40]!r}")


def _limit(n: int) -> int:
    return max(1, min(int(n), MAX_LIMIT))


def build(ledgers: Ledgers) -> MCPServer[object]:
    """The MCP server over `ledgers`: its tools and resources."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    from wake import __version__

    agent = ledgers.agent_id
    server: MCPServer[object] = MCPServer(
        name="wake", version=__version__,
        instructions=(f"The witness record of agent {agent!r}'s autonomous wakes, read-only: what each wake saw (its arrival), "
                      "what it did (its transcript: every model turn, tool call and answer), how its binding changed, "
                      "what is open (commitments, findings) and the settled state. Nothing here can change them. " + DATA.system_note()),
    )
    _tools(server, ledgers, ToolAnnotations(**READ_ONLY))
    _resources(server, ledgers)
    return server


def _tools(server: MCPServer[object], ledgers: Ledgers, ro: ToolAnnotations) -> None:
    @server.tool(description="The agent's recent wakes, newest first: tier, trigger, status, times, tools bound, cost, note; "
                             "`count` says how many (0: none recorded, or none of that tier or status).", annotations=ro)
    async def recent_wakes(limit: int = 10, tier: Literal["whisper", "surface", "full"] | None = None,
                           status: str | None = None) -> dict[str, Any]:
        # An object, not a bare list: an empty list came back as a result with no content at all. The
        # tier is one of the three (the schema says so; the SDK refuses another before this runs).
        wakes = await ledgers.recent_wakes(limit, tier, status)
        return {"agent": ledgers.agent_id, "count": len(wakes), "wakes": wakes}

    @server.tool(description="One wake's record (an id or a unique prefix): status, note, error, thinking totals, final text, chain link.",
                 annotations=ro)
    async def wake(wake_id: str) -> dict[str, Any]:
        return await ledgers.wake(wake_id)

    @server.tool(description="The arrival one wake saw before its first token, block by block in prompt order.", annotations=ro)
    async def wake_arrival(wake_id: str) -> dict[str, Any]:
        return await ledgers.arrival(wake_id)

    @server.tool(description="One wake's transcript: every message its model saw, every tool call with arguments, outcome and answer.",
                 annotations=ro)
    async def wake_transcript(wake_id: str) -> dict[str, Any]:
        return await ledgers.transcript(wake_id)

    @server.tool(description="The binding diff of a wake (default: the newest): tools added, removed, changed; blocks that changed.",
                 annotations=ro)
    async def binding_diff(wake_id: str | None = None) -> dict[str, Any]:
        return await ledgers.binding_diff(wake_id)

    @server.tool(description="The agent's open commitments, newest first, with the number open.", annotations=ro)
    async def open_commitments(limit: int = 20) -> dict[str, Any]:
        return await ledgers.open_commitments(limit)

    @server.tool(description="The Cloister canary's findings about the agent's memory (state: open, acknowledged, reverted, logged, all).",
                 annotations=ro)
    async def findings(state: str = "open", limit: int = 20) -> dict[str, Any]:
        return await ledgers.findings(state, limit)

    @server.tool(description="The agent's latest settled state, as its next wake arrives to it.", annotations=ro)
    async def settled_state() -> dict[str, Any]:
        return await ledgers.settled_state()



def _resources(server: MCPServer[object], ledgers: Ledgers) -> None:
    agent = ledgers.agent_id

    @server.resource(f"wake://{agent}/wakes", name="recent wakes", mime_type="application/json")
    async def recent_resource() -> str:
        return render.to_json(await ledgers.recent_wakes(20, None, None))

    @server.resource(f"wake://{agent}/wakes/{{wake_id}}/arrival", name="a wake's arrival", mime_type="text/markdown")
    async def arrival_resource(wake_id: str) -> str:
        got = await ledgers.arrival(wake_id)
        return render.arrival([(b["name"], b["text"]) for b in got["blocks"]])

    @server.resource(f"wake://{agent}/wakes/{{wake_id}}/transcript", name="a wake's transcript", mime_type="text/plain")
    async def transcript_resource(wake_id: str) -> str:
        return render.transcript(await ledgers.stored_transcript(wake_id))

    @server.resource(f"wake://{agent}/commitments", name="open commitments", mime_type="application/json")
    async def commitments_resource() -> str:
        return render.to_json(await ledgers.open_commitments(50))

    @server.resource(f"wake://{agent}/findings", name="open findings", mime_type="application/json")
    async def findings_resource() -> str:
        return render.to_json(await ledgers.findings("open", 50))

    @server.resource(f"wake://{agent}/settled", name="settled state", mime_type="application/json")
    async def settled_resource() -> str:
        return render.to_json(await ledgers.settled_state())


async def serve(config: Config, agent_id: str, listen: str | None) -> None:
    log = logs.get("wake.mcp").bind(agent=agent_id)
    async with ledger_stores(config) as st:
        server = build(Ledgers(st, agent_id))
        if listen is None:
            log.info("mcp.serving", transport="stdio")
            await server.run_stdio_async()
            return
        import uvicorn

        host, _ = parse_listen(listen)
        sock = listen_socket.bind(listen, "MCP server")  # listening before the line names the URL
        app = server.streamable_http_app(host=host)
        web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        log.info("mcp.listening", transport="streamable-http", url=f"{listen_socket.url_of(sock)}/mcp")
        await web.serve(sockets=[sock])


@click.group("mcp")
def mcp_group() -> None:
    """wake as an MCP server: the ledgers of one agent, read-only, for a chat surface."""


@mcp_group.command("serve")
@agent_option()
@click.option("--listen", help="Serve streamable HTTP on HOST:PORT (path /mcp; port 0 picks one) instead of stdio.")
@pass_ctx
def serve_cmd(ctx: Context, agent_id: str | None, listen: str | None) -> None:
    """Serve the agent's recent wakes, each wake's record, arrival and transcript, the binding
    diff, open commitments, findings and the settled state as read-only MCP tools and
    resources, over stdio (default) or streamable HTTP. Nothing it serves can write."""
    config = ctx.config
    agent = default_agent(config, agent_id)
    if listen is not None:
        try:
            parse_listen(listen)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--listen") from exc
    try:
        run_async(lambda: serve(config, agent, listen))
    except KeyboardInterrupt:
        pass

