"""MCP servers as a tool source (docs/tools.md, "MCP servers").

Each configured server is one `Server`: a session over stdio (wake starts the command) or
streamable HTTP, opened with the official `mcp` SDK, its tools listed and turned into registry
`Tool`s named `<server>__<tool>`. The `Hub` holds every server of a process and is attached to the
registry (`Registry.attach`), so a server's tools come and go with it: a server that cannot
start, list or answer has no tools in the registry, and the wake says so (`Hub.states`).

Surfaces come from the operator (an MCP server knows nothing of wake's tiers): a tool no
configured glob matches is registered with no surface and never bound. `mutates` comes from the
tool's annotations (`readOnlyHint: true` means it does not) unless the operator overrides it; so
do its flow labels (`surfaces.flow_labels.from_annotations`, replaced by the `flows` globs).

With `keep_alive` (the daemon) a server that dies is started again with a bounded exponential
backoff, pinged while idle, and re-listed on `notifications/tools/list_changed`; without it
(`wake up`) a server is opened for one wake and closed with it. A server subprocess never outlives
`Hub.close()`: the SDK's stdio transport closes its stdin, then terminates its process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from surfaces import flow_labels
from surfaces.errors import DeclarationError, McpToolError
from surfaces.errors import McpUnavailable as McpUnavailable
from surfaces.registry import Tool

if TYPE_CHECKING:  # the SDK is imported when a server starts
    import mcp_types
    from mcp import Client

SEPARATOR = "__"
_SAFE = re.compile(r"[^A-Za-z0-9_-]")
SERVER_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")  # no "_": the separator stays unambiguous


@dataclass(frozen=True, kw_only=True)
class ServerSpec:
    """One server as wake configured it (plain values: the secrets are resolved by the caller)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # may carry credentials
    cwd: Path | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    surfaces: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob over the server's tool names, surfaces)
    mutates: tuple[tuple[str, bool], ...] = ()  # (glob, mutates): overrides the annotations
    requires_approval: tuple[str, ...] = ()  # globs over the server's tool names whose calls wait for an operator
    flows: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob, flow labels): replace the labels the annotations give
    pin: str = "strict"
    start_timeout_s: float = 15.0
    list_timeout_s: float = 10.0
    call_timeout_s: float = 30.0
    ping_interval_s: float = 30.0
    restart_min_s: float = 1.0
    restart_max_s: float = 60.0
    result_max_chars: int = 200_000  # a result is clipped here before the loop's own cap
    stderr: Path | None = None  # where a stdio server's stderr goes (appended); None: discarded

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


@dataclass(frozen=True, kw_only=True)
class McpTool(Tool):
    """A tool an MCP server serves; its canonical declaration names the server and its version."""

    server: str = ""
    remote_name: str = ""
    annotations: Mapping[str, object] = field(default_factory=dict)
    pin_policy: str = "strict"

    def declaration(self) -> dict[str, object]:
        return {
            "name": self.name, "description": self.description, "parameters": self.parameters, "version": self.version,
            "server": self.server, "tool": self.remote_name, "annotations": dict(self.annotations),
        }


def namespaced(server: str, tool: str) -> str:
    """`<server>__<tool>`, every character outside the OpenAI function-name rule made `_`."""
    return f"{server}{SEPARATOR}{_SAFE.sub('_', tool)}"


def _json_safe(value: object) -> Any:
    """A schema as the manifest can hash it: integral floats as integers (JSON has no difference)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _globbed(rules: Sequence[tuple[str, object]], name: str) -> list[Any]:
    return [value for pattern, value in rules if fnmatch.fnmatchcase(name, pattern)]


def build_tools(spec: ServerSpec, listed: Sequence[mcp_types.Tool], server_version: str, handler_for: Callable[[str], Any],
                check: Callable[[Tool], None]) -> dict[str, McpTool]:
    """The registry tools of one listing; a problem raises `DeclarationError` naming the server
    and key (a glob that matches nothing, a name over 64 characters, a collision, a bad schema)."""
    where = f"mcp server {spec.name}"
    remote_names = [t.name for t in listed]
    approval = tuple((pattern, True) for pattern in spec.requires_approval)
    for key, rules in (("surfaces", spec.surfaces), ("mutates", spec.mutates), ("requires_approval", approval), ("flows", spec.flows)):
        for pattern, _ in rules:
            if not any(fnmatch.fnmatchcase(n, pattern) for n in remote_names):
                lists = ", ".join(remote_names) or "none"
                raise DeclarationError(f"{where}: tools.mcp.{spec.name}.{key} glob {pattern!r} matches no tool of the server (it lists: {lists})")
    out: dict[str, McpTool] = {}
    for t in listed:
        name = namespaced(spec.name, t.name)
        if len(name) > 64:
            raise DeclarationError(f"{where}: tool {t.name!r} is {len(name)} characters as {name[:40]}... (over 64); rename the server shorter")
        if name in out:
            raise DeclarationError(f"{where}: tools {out[name].remote_name!r} and {t.name!r} both become {name!r}")
        annotations = t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations is not None else {}
        overrides = _globbed(spec.mutates, t.name)
        mutates = overrides[-1] if overrides else annotations.get("readOnlyHint") is not True
        surfaces = frozenset(s for found in _globbed(spec.surfaces, t.name) for s in found)
        tool = McpTool(
            name=name, description=(t.description or "").strip() or f"{t.name} (from MCP server {spec.name})",
            parameters=_json_safe(dict(t.input_schema)), version=server_version or "unknown", handler=handler_for(t.name),
            mutates=mutates, surfaces=surfaces, origin=f"mcp server {spec.name}", server=spec.name, remote_name=t.name,
            annotations=_json_safe(annotations), pin_policy=spec.pin, requires_approval=bool(_globbed(approval, t.name)),
            flows=flow_labels.overridden(t.name, flow_labels.from_annotations(annotations), spec.flows),
        )
        check(tool)
        out[name] = tool
    return out


def answer(result: Any, max_chars: int) -> str:
    """A `CallToolResult` as the tool's answer: its text parts (the structured content as JSON when
    it has none); images, audio and resources are named, not inlined.
    `isError` raises `McpToolError` with the text."""
    parts: list[str] = []
    for c in result.content:
        kind = getattr(c, "type", "?")
        if kind == "text":
            parts.append(c.text[:max_chars])
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {c.mime_type}, {len(c.data) * 3 // 4} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {c.uri}{' ' + c.name if c.name else ''}, not inlined]")
        elif kind == "resource":
            parts.append(f"[resource {c.resource.uri}, {getattr(c.resource, 'mime_type', None) or 'no type'}, not inlined]")
        else:
            parts.append(f"[{kind} content, not shown]")
    structured = result.structured_content
    if structured is not None and not any(getattr(c, "type", "") == "text" for c in result.content):
        # the spec asks a server to send structured content as text too; when it did not, the JSON is the answer
        parts.append(json.dumps(structured, sort_keys=True, default=str)[:max_chars])
    text = "\n".join(parts)[:max_chars]
    if result.is_error:
        raise McpToolError(text or "the server reported an error and said nothing more")
    return text


class Server:
    """One MCP server: its session, run by a task of its own (the SDK's transports are anyio
    context managers, entered and left by one task), its state and its current tools."""

    def __init__(self, spec: ServerSpec, *, keep_alive: bool, check: Callable[[Tool], None]) -> None:
        self.spec = spec
        self.keep_alive = keep_alive
        self._check = check
        self.state = "stopped"  # starting | ready | failed | stopped
        self.reason: str | None = None
        self.declaration_error: DeclarationError | None = None
        self.tools: dict[str, McpTool] = {}
        self.known: tuple[str, ...] = ()  # the names of its tools when it last listed (a failed server's tools)
        self.server_version: str | None = None
        self.starts = 0
        self.relists = 0
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._settled = asyncio.Event()  # the first start ended: ready or failed
        self._wake = asyncio.Event()  # re-list now (list_changed), or the session died
        self._changed = asyncio.Event()  # set (and replaced) on every state change and listing

    def _note(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def until(self, predicate: Callable[[Server], bool], timeout_s: float) -> bool:
        """Wait, at most `timeout_s`, for the server to reach a state `predicate` accepts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate(self):
            changed = self._changed
            left = deadline - loop.time()
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)
        return True

    async def open(self) -> None:
        """Start the server and wait until it is ready or has failed (bounded by its timeouts)."""
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.spec.name}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), self.spec.start_timeout_s + self.spec.list_timeout_s + 5)

    async def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self._task), 10)
            if not self._task.done():
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._task
        self.state = "stopped" if self.state != "failed" else self.state
        self.tools = {}

    async def _supervise(self) -> None:
        delay = self.spec.restart_min_s
        try:
            while not self._stop.is_set():
                self.starts += 1
                ran_ready = await self._run_once()
                self._settled.set()
                if self._stop.is_set() or not self.keep_alive or self.declaration_error is not None:
                    return
                delay = self.spec.restart_min_s if ran_ready else min(delay * 2, self.spec.restart_max_s)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
        finally:
            self._settled.set()

    async def _run_once(self) -> bool:
        """One session, from start to its end; True when it got as far as ready."""
        self.state, self._wake = "starting", asyncio.Event()
        ready = False
        try:
            from mcp import Client

            async with contextlib.AsyncExitStack() as stack:
                transport = self._transport(stack)
                client = Client(transport, message_handler=self._on_message, cache=None)  # a re-listing must reach the server
                async with asyncio.timeout(self.spec.start_timeout_s):
                    await stack.enter_async_context(client)
                info = client.server_info
                self.server_version = info.version if info is not None else None
                self._client = client
                await self._list()
                self.state, self.reason, ready = "ready", None, True
                self._settled.set()
                self._note()
                await self._serve(client)
        except Exception as exc:  # the server, its transport or the SDK: all end this session
            leaf = _leaf(exc)  # anyio's task groups wrap what was raised inside them
            if isinstance(leaf, DeclarationError):
                self.declaration_error, self.reason = leaf, str(leaf)
            else:
                self.reason = _reason(exc)
        finally:
            self._client, self.tools = None, {}
            if not self._stop.is_set():
                self.state = "failed"
                self.reason = self.reason or "the session ended"
            self._note()
        return ready

    async def _serve(self, client: Client) -> None:
        """Wait for the stop, a list_changed (re-list) or the session's end (a failed listing)."""
        listener = asyncio.create_task(self._listen(client)) if client.protocol_version >= "2026" else None
        try:
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.spec.ping_interval_s)
                if self._stop.is_set():
                    return
                if self._wake.is_set():
                    self._wake.clear()
                    if self._client is None:
                        raise McpUnavailable("the session ended")
                    self.relists += 1
                    await self._list()
                else:  # idle: list again, which proves the session alive (2026-era MCP has no ping) and sees a quiet rewrite
                    await self._list()
        finally:
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await listener

    async def _listen(self, client: Client) -> None:
        """A 2026-era server announces list changes on a `subscriptions/listen` stream."""
        with contextlib.suppress(Exception):
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    self._wake.set()

    async def _on_message(self, message: object) -> None:
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._wake.set()

    async def _list(self) -> None:
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        async with asyncio.timeout(self.spec.list_timeout_s):
            while True:
                page = await self._client.list_tools(cursor=cursor)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        self.tools = build_tools(self.spec, listed, self.server_version or "", self._handler, self._check)
        self.known = tuple(sorted(self.tools))
        self._note()

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        spec = self.spec
        if spec.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            errlog: TextIO
            if spec.stderr is not None:
                spec.stderr.parent.mkdir(parents=True, exist_ok=True)
                errlog = stack.enter_context(spec.stderr.open("a", encoding="utf-8"))
            else:
                errlog = stack.enter_context(open("/dev/null", "w", encoding="utf-8"))  # noqa: SIM115 (closed by the stack)
            params = StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd)
            return stdio_client(params, errlog=errlog)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers=dict(spec.headers))
        return _with_client(stack, http, spec.url or "", streamable_http_client)

    def _handler(self, remote: str) -> object:
        async def call(ctx: object, **arguments: object) -> str:
            return await self.call(remote, arguments)

        return call

    async def call(self, remote: str, arguments: Mapping[str, object]) -> str:
        """Call one tool; a call past `call_timeout_s` is abandoned, which the SDK tells the server
        with `notifications/cancelled`, and answered as a timeout."""
        client = self._client
        if client is None or self.state != "ready":
            raise McpUnavailable(f"MCP server {self.spec.name} is {self.state}: {self.reason or 'not started'}")
        try:
            async with asyncio.timeout(self.spec.call_timeout_s):
                result = await client.call_tool(remote, dict(arguments))
        except TimeoutError:
            raise TimeoutError(f"MCP server {self.spec.name} did not answer {remote} in {self.spec.call_timeout_s}s") from None
        except Exception as exc:
            from mcp import MCPError

            if not isinstance(exc, MCPError) or exc.error.code == -32000:  # the connection closed: the session is over
                self._client = None
                self._wake.set()
            raise McpUnavailable(f"MCP server {self.spec.name}: {_reason(exc)}") from exc
        return answer(result, self.spec.result_max_chars)

    def describe(self) -> dict[str, object]:
        return {
            "server": self.spec.name, "transport": self.spec.transport, "state": self.state, "reason": self.reason,
            "version": self.server_version, "tools": sorted(self.tools) if self.tools else list(self.known),
            "starts": self.starts, "relists": self.relists, "pin": self.spec.pin,
        }


@contextlib.asynccontextmanager
async def _with_client(stack: contextlib.AsyncExitStack, http: Any, url: str, connect: Any) -> Any:
    """The HTTP transport over an httpx client that is closed with it (the SDK leaves a client it
    was given open)."""
    async with http, connect(url, http_client=http) as streams:
        yield streams


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    """An exception as one line; an exception group (anyio's) as its first leaf."""
    exc = _leaf(exc)
    text = " ".join(str(exc).split())
    if isinstance(exc, TimeoutError) and not text:
        text = "timed out"
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class Hub:
    """Every MCP server of one process; attached to the registry, whose tools it adds."""

    def __init__(self, specs: Iterable[ServerSpec], *, keep_alive: bool = False) -> None:
        self.specs = tuple(specs)
        self.keep_alive = keep_alive
        self.servers: dict[str, Server] = {}
        self._check: Callable[[Tool], None] = lambda tool: None

    def bind_checker(self, check: Callable[[Tool], None]) -> None:
        """How the registry validates a listed tool (schema, surfaces, duplicates)."""
        self._check = check

    async def start(self) -> None:
        """Start every server at once and wait for each to be ready or failed. A declaration
        problem (a glob that matches nothing, a name too long) closes them all and raises."""
        self.servers = {s.name: Server(s, keep_alive=self.keep_alive, check=self._check) for s in self.specs}
        await asyncio.gather(*(s.open() for s in self.servers.values()))
        bad = next((s.declaration_error for s in self.servers.values() if s.declaration_error is not None), None)
        if bad is not None:
            await self.close()
            raise bad

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.servers.values()))

    def tools(self) -> list[Tool]:
        return [t for s in self.servers.values() for t in s.tools.values()]

    def states(self) -> list[dict[str, Any]]:
        return [s.describe() for s in self.servers.values()]
