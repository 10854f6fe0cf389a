"""What a command that runs wakes needs open: the stores (schema checked) and the registry."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from surfaces import loader
from surfaces.checked_schemas import CheckedSchemas
from surfaces.errors import DeclarationError
from surfaces.registry import Registry
from wake import stores
from wake.config import Config
from wake.errors import ConfigError, RegistryError
from wake.stores.prepared import prepare_schema
from wake.think import client

CHECKED_SCHEMAS = "cache/checked-schemas"  # under the state directory: the tool schemas that passed the metaschema check
EMBEDDED_DIR = "llama"  # under the state directory: the embedded model server's log (llama-server.log)


def every_tier(config: Config) -> list[tuple[str, str]]:
    return [(agent_id, tier) for agent_id, agent in config.agents.items() for tier in agent.tiers]


def require_embedded(config: Config, tiers: list[tuple[str, str]]) -> None:
    """Before a command starts wakes of `tiers` ((agent, tier) pairs): each embedded route they
    name must be fetched, else one line says to run `wake model fetch` (`ModelUnavailable`, exit 69)."""
    from wake.model import embedded

    for agent_id, tier_name in tiers:
        route_name = config.tier(agent_id, tier_name).model
        route = config.models.get(route_name) if route_name else None
        if route is not None and route.kind == "embedded":
            problem = embedded.not_fetched(embedded.default_cache_dir(), route.model)
            if problem is not None:
                raise problem


def build_registry(config: Config) -> Registry:
    """Load every tool; a malformed declaration stops startup with a message naming the tool, and
    so does a tier whose `tool_choice` names a tool its binding does not hold."""
    try:
        registry = loader.build(
            config.tools.modules, config.tools.surfaces, entry_points=config.tools.entry_points, graph=config.neo4j.uri is not None,
            checked=CheckedSchemas(config.state_dir_path() / CHECKED_SCHEMAS),
        )
    except DeclarationError as exc:
        raise RegistryError(f"tool registry: {exc}") from exc
    check_tool_choices(config, registry)
    check_approval_rules(config, registry)
    registry.require_approval(config.tools.requires_approval)
    registry.label(config.tools.flows.items())
    return registry


def check_approval_rules(config: Config, registry: Registry) -> None:
    """Each `tools.requires_approval` glob marks something: a tool of the registry, or (a name
    with `__`) a tool of a configured MCP server, whose tools are listed only once it runs. A
    glob that matches nothing would leave the tool it meant to hold running unattended."""
    import fnmatch

    servers = sorted(config.tools.mcp)
    for rule in config.tools.requires_approval:
        if any(fnmatch.fnmatchcase(t.name, rule) for t in registry):
            continue
        server, sep, _ = rule.partition("__")
        if sep and any(fnmatch.fnmatchcase(s, server) for s in servers):
            continue
        shown = rule if len(rule) <= 64 else f"{rule[:64]}... ({len(rule)} characters)"
        raise ConfigError(
            str(config.path), "tools.requires_approval",
            f"{shown!r} matches no tool (a built-in or module tool by name, an MCP tool as server__tool; servers: {', '.join(servers) or 'none'})",
        )


def check_tool_choices(config: Config, registry: Registry) -> None:
    """A tier's named `tool_choice` must be a tool of its own binding (a choice the model could
    never satisfy would fail every wake at its first turn)."""
    for agent_id, agent in config.agents.items():
        for tier_name in agent.tiers:
            tier = config.tier(agent_id, tier_name)
            named = tier.tool_choice.names()
            if not named:
                continue
            bound = {t.name for t in registry.binding(tier.binds)}
            for name in sorted(named - bound):
                raise ConfigError(
                    str(config.path), f"agents.{agent_id}.tiers.{tier_name}.tool_choice",
                    f"{name!r} is not bound at this tier (it binds {', '.join(sorted(bound)) or 'no tools'})",
                )


@dataclass
class Session:
    config: Config
    stores: stores.Stores
    registry: Registry
    # The process's one model client (keep-alive pool), closed with the session; None (a test's
    # session) lets each wake open and close its own.
    models: client.Client | None = None


@contextlib.asynccontextmanager
async def open_session(config: Config, *, neo4j: bool = True, keep_alive: bool = False) -> AsyncIterator[Session]:
    """`keep_alive` (the daemon): MCP servers are restarted when they die and re-listed when
    their tools change; otherwise they are opened for this session and closed with it."""
    registry = build_registry(config)
    async with stores.connected(config, neo4j=neo4j) as st:
        await prepare_schema(st)
        async with opened_mcp(config, registry, keep_alive=keep_alive):
            models = client.Client(embedded_dir=config.state_dir_path() / EMBEDDED_DIR)
            try:
                yield Session(config=config, stores=st, registry=registry, models=models)
            finally:
                await models.aclose()


@contextlib.asynccontextmanager
async def opened_mcp(config: Config, registry: Registry, *, keep_alive: bool) -> AsyncIterator[None]:
    """The configured MCP servers, started on the registry (a declaration problem is a
    `RegistryError`, exit 70, with every server closed)."""
    from wake.run import mcp_tools

    try:
        async with mcp_tools.opened(config, registry, keep_alive=keep_alive):
            yield
    except DeclarationError as exc:
        raise RegistryError(f"tool registry: {exc}") from exc
