"""The MCP servers of a process, from the config to the wake (docs/tools.md, "MCP servers").

`specs` resolves each `[tools.mcp.<server>]` into a `surfaces.mcp.ServerSpec` (a command on
PATH, the credentials read; either missing is one line naming the server and key, exit 78);
`opened` starts a `Hub` on the registry and closes it (no server process outlives it); `vet`
is step 4's part for MCP tools: each bound MCP tool's declaration is compared with its pin
(`ledgers.tool_pins`), and `tools_source` gives the typed `tools` arrival block that says what
was not bound and why."""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from ledgers import tool_pins
from surfaces import mcp
from surfaces.registry import Registry, Tool
from wake import logs, secrets
from wake.arrival.engine import CacheTier, Found, Part, Source
from wake.config import Config
from wake.errors import ConfigError
from wake.stores import Stores
from wake.witness import manifest

log = logs.get("wake.mcp")
TOOLS_BLOCK = "tools"


def specs(config: Config) -> list[mcp.ServerSpec]:
    """Every configured server as the hub starts it; a command not found or a credential not
    set raises `ConfigError` naming the server and key."""
    out = []
    for name, conf in sorted(config.tools.mcp.items()):
        key = f"tools.mcp.{name}"
        env = dict(conf.env)
        for variable, credential in conf.env_credentials.items():
            env[variable] = _credential(config, f"{key}.env_credentials.{variable}", credential)
        headers = dict(conf.headers)
        for header, credential in conf.header_credentials.items():
            headers[header] = _credential(config, f"{key}.header_credentials.{header}", credential)
        command = conf.command
        if command is not None and shutil.which(command) is None:
            problem = f"mcp server {name}: command {command[:80]!r} not found (not an executable on PATH)"
            raise ConfigError(str(config.path), f"{key}.command", problem)
        cwd = config.config_relative(conf.cwd) if conf.cwd else None
        if cwd is not None and not cwd.is_dir():
            raise ConfigError(str(config.path), f"{key}.cwd", f"mcp server {name}: {str(cwd)[:120]!r} is not a directory")
        out.append(mcp.ServerSpec(
            name=name, command=command, args=conf.args, env=env, cwd=cwd, url=conf.url, headers=headers,
            surfaces=tuple(conf.surfaces.items()), mutates=tuple(conf.mutates.items()), pin=conf.pin,
            requires_approval=conf.requires_approval, flows=tuple(conf.flows.items()),
            start_timeout_s=conf.start_timeout_s, list_timeout_s=conf.list_timeout_s, call_timeout_s=conf.call_timeout_s,
            ping_interval_s=conf.ping_interval_s, restart_max_s=conf.restart_max_s,
            result_max_chars=max(config.think.tool_result_max_chars * 4, 10_000),
            stderr=config.state_dir_path() / "mcp" / f"{name}.stderr" if command is not None else None,
        ))
    return out


def _credential(config: Config, key: str, credential: str) -> str:
    found = secrets.read_secret(credential)
    if found is None:
        where = f"${secrets.env_name(credential)} or $CREDENTIALS_DIRECTORY/{credential}"
        raise ConfigError(str(config.path), key, f"credential {credential!r} is not set ({where})")
    return found.reveal()


def hub_of(registry: Registry) -> mcp.Hub | None:
    return next((s for s in registry.attached if isinstance(s, mcp.Hub)), None)


@contextlib.asynccontextmanager
async def opened(config: Config, registry: Registry, *, keep_alive: bool) -> AsyncIterator[mcp.Hub | None]:
    """Start every configured server on the registry, and close them all on the way out. A
    server that cannot start is logged and left `failed` (its tools are not bound and the wake's
    `tools` block says so); a declaration problem raises `DeclarationError` with nothing left running."""
    if not config.tools.mcp:
        yield None
        return
    hub = mcp.Hub(specs(config), keep_alive=keep_alive)
    registry.attach(hub)
    try:
        await hub.start()
        for state in hub.states():
            if state["state"] == "ready":
                log.info("mcp.ready", server=state["server"], tools=len(state["tools"]), version=state["version"])
            else:
                log.warning("mcp.failed", server=state["server"], error=state["reason"])
        yield hub
    finally:
        await hub.close()
        registry.attached.remove(hub)


@dataclass(frozen=True, kw_only=True)
class Vetted:
    """Step 4's MCP part: the binding after the pins, and what the `tools` block reports."""

    binding: list[Tool]
    verdicts: list[tool_pins.Verdict] = field(default_factory=list)
    servers: list[dict[str, Any]] = field(default_factory=list)
    unbound: dict[str, list[str]] = field(default_factory=dict)  # server -> its tools this tier would hold and does not
    error: str | None = None  # the pins could not be read: no MCP tool is bound
    flow_lines: tuple[str, ...] = ()  # what the binding's toxic flow check says (wake.witness.flows.block_lines)


async def vet(
    conn: asyncpg.Connection, registry: Registry, binding: Sequence[Tool], binds: Sequence[str], at: dt.datetime, *, record: bool = True,
) -> Vetted:
    """Hold back every MCP tool whose declaration differs from its pin under `strict` (a finding
    is raised, once per declaration, under `strict` and `warn`), and name the tools of servers
    that are not ready. With the pins unreadable no MCP tool is bound (its pin is unknown).
    `record=False` (a dry run) pins nothing and raises nothing. `conn`: the wake's connection."""
    hub = hub_of(registry)
    if hub is None:
        return Vetted(binding=list(binding))
    servers = hub.states()
    mcp_bound = [t for t in binding if isinstance(t, mcp.McpTool)]
    seen = [
        tool_pins.Seen(server=t.server, tool=t.remote_name, name=t.name, hash=manifest.tool_hash(t),
                       declaration=t.declaration(), policy=t.pin_policy) for t in mcp_bound
    ]
    verdicts: list[tool_pins.Verdict] = []
    error = None
    if seen:
        try:
            verdicts = await tool_pins.vet(conn, seen, at, record=record)
        except Exception as exc:  # PostgreSQL: without the pins nothing of MCP is trusted
            error = logs.redact_text(f"{type(exc).__name__}: {exc}")
            log.error("mcp.pins_unreadable", error=error)
    for v in verdicts:
        if v.new_finding:
            log.warning("mcp.declaration_changed", server=v.server, tool=v.tool, finding=v.finding_id, bound=v.bind)
    held_back = {v.name for v in verdicts if not v.bind} | ({t.name for t in mcp_bound} if error else set())
    down = [s for s in servers if s["state"] != "ready"]
    pinned: dict[str, list[str]] = {}
    if down and error is None:
        with contextlib.suppress(Exception):  # the names are a courtesy; the block fails the server either way
            for (server, _), pin in sorted((await tool_pins.pins_of(conn, [s["server"] for s in down])).items()):
                pinned.setdefault(server, []).append(pin.name)
    unbound = {s["server"]: _would_hold(s, hub, binds, pinned.get(s["server"], [])) for s in down}
    return Vetted(
        binding=[t for t in binding if t.name not in held_back], verdicts=verdicts, servers=servers,
        unbound={k: v for k, v in unbound.items() if v}, error=error,
    )


def _would_hold(state: dict[str, Any], hub: mcp.Hub, binds: Sequence[str], pinned: Sequence[str]) -> list[str]:
    """The tools of a server that is not ready which this tier would hold, when its configured
    surfaces meet the tier's binds: those it listed last in this process, else those pinned (a
    server never seen: `<server>__*`)."""
    from surfaces.registry import surface_meets

    spec = next(s for s in hub.specs if s.name == state["server"])
    declared = {s for _, surfaces in spec.surfaces for s in surfaces}
    if not any(surface_meets(b, s) for b in binds for s in declared):
        return []
    return list(state["tools"]) or list(pinned) or [f"{spec.name}__*"]


def _render(v: Vetted) -> Found:
    parts: list[Part] = []
    lines: list[str] = []
    for s in v.servers:
        name, unbound = s["server"], v.unbound.get(s["server"], [])
        if s["state"] == "ready":
            parts.append(Part(name=f"mcp {name}"))
            continue
        reason = f"could not reach MCP server {name}: {s['reason'] or s['state']}"
        if unbound:
            reason += f"; tools {', '.join(unbound)} not bound"
        parts.append(Part(name=f"mcp {name}", reason=reason))
        lines.append(f"- {reason}")
    if v.error:
        parts.append(Part(name="pins", reason=f"could not read the tool pins: {v.error}; no MCP tool is bound"))
        lines.append(f"- could not read the tool pins ({v.error}): no MCP tool is bound")
    for verdict in v.verdicts:
        if verdict.pin == "changed":
            held = "not bound until an operator accepts it" if not verdict.bind else "bound anyway (pin policy warn)"
            lines.append(
                f"- tool {verdict.name}: its declaration differs from the one pinned (finding {verdict.finding_id}); {held}"
            )
    lines.extend(v.flow_lines)
    if not lines:
        bound = sum(1 for _ in v.verdicts)
        return Found(text=f"Every MCP tool this wake should hold is bound ({bound}).", rows=0, parts=tuple(parts))
    return Found(text="Tools from MCP servers:\n" + "\n".join(lines), rows=len(lines), parts=tuple(parts))


def tools_source(v: Vetted) -> Source:
    """The `tools` block: which servers could not be reached and which tools a pin held back."""
    found = _render(v)

    async def fn(ctx: object) -> Found:
        return found

    return Source(name=TOOLS_BLOCK, cache_tier=CacheTier.volatile, fn=fn)


async def pin_states(stores: Stores | None, registry: Registry) -> dict[str, str]:
    """Each MCP tool's pin state for `wake registry`: pinned, changed (an open finding), unpinned
    (never seen by a wake, or policy off), unknown (PostgreSQL not reachable)."""
    tools = [t for t in registry if isinstance(t, mcp.McpTool)]
    if not tools:
        return {}
    if stores is None:
        return {t.name: "unknown" for t in tools}
    async with stores.pg_conn() as conn:
        pins = await tool_pins.pins_of(conn, sorted({t.server for t in tools}))
    out = {}
    for t in tools:
        pin = pins.get((t.server, t.remote_name))
        if t.pin_policy == "off" or pin is None:
            out[t.name] = "unpinned"
        else:
            out[t.name] = "pinned" if pin.hash == manifest.tool_hash(t) else "changed"
    return out


def sources(v: Vetted) -> list[Source]:
    """The `tools` block when MCP servers are configured; nothing otherwise."""
    return [tools_source(v)] if v.servers or v.flow_lines else []
