"""The root of the config, `Config`: its sections, the checks that span them (a tier's surfaces,
sources, routes and model must exist; agent ids follow AGENT_ID_PATTERN), and the environment
the loader read for it (`environment.Environment`)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr, field_validator, model_validator

from memory.config import MemoryConfig
from surfaces.context import ToolSettings
from surfaces.names import known_surfaces
from wake.config.anchor import AnchorConfig
from wake.config.channels import InboxConfig
from wake.config.environment import Environment
from wake.config.sections import (
    BUILTIN_SOURCES,
    OPERATOR_SOURCES,
    AgentConfig,
    ConsoleConfig,
    DaemonConfig,
    DeliveryRoute,
    EnginesConfig,
    GateConfig,
    LogConfig,
    MetricsConfig,
    ModelRoute,
    Neo4jConfig,
    PostgresConfig,
    ProbesConfig,
    RedisConfig,
    RetractionsConfig,
    SqlSourceConfig,
    ThinkConfig,
    TierConfig,
    ToolsConfig,
)
from wake.config.values import _Model, check_agent_id, clip
from wake.config.views import ConfigViews
from wake.errors import KeyProblem


class Config(ConfigViews, _Model):
    state_dir: str | None = None
    postgres: PostgresConfig = PostgresConfig()
    redis: RedisConfig = RedisConfig()
    engines: EnginesConfig = EnginesConfig()
    neo4j: Neo4jConfig = Neo4jConfig()
    log: LogConfig = LogConfig()
    tools: ToolsConfig = ToolsConfig()
    daemon: DaemonConfig = DaemonConfig()
    metrics: MetricsConfig = MetricsConfig()
    console: ConsoleConfig = ConsoleConfig()
    models: dict[str, ModelRoute] = {}
    probes: ProbesConfig = ProbesConfig()
    retractions: RetractionsConfig = RetractionsConfig()
    think: ThinkConfig = ThinkConfig()
    gate: GateConfig = GateConfig()
    sql_sources: dict[str, SqlSourceConfig] = {}
    delivery: dict[str, DeliveryRoute] = {}
    inbox: InboxConfig = InboxConfig()
    anchor: AnchorConfig = AnchorConfig()  # [anchor]: the chain heads' timestamp authority (wake/config/anchor.py)
    agents: dict[str, AgentConfig]

    _path: Path = PrivateAttr(default=Path("."))
    _hash: str | None = PrivateAttr(default=None)
    _environment: Environment = PrivateAttr(default_factory=Environment)
    _tool_settings: ToolSettings | None = PrivateAttr(default=None)
    _memory_configs: dict[str, MemoryConfig] = PrivateAttr(default_factory=dict)
    _memory_paths: dict[str, Path] = PrivateAttr(default_factory=dict)

    @field_validator("agents", mode="before")
    @classmethod
    def _agent_ids(cls, value: Any) -> Any:
        for agent_id in value if isinstance(value, dict) else ():
            try:
                check_agent_id(agent_id)
            except ValueError as exc:
                raise KeyProblem((), str(exc)) from None
        return value

    @model_validator(mode="after")
    def _references(self) -> Config:
        if not self.agents:
            raise KeyProblem(("agents",), "expected at least one agent table [agents.<id>]")
        for name in self.sql_sources:
            if name in BUILTIN_SOURCES | OPERATOR_SOURCES or not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", name):
                raise KeyProblem(("sql_sources", name), "expected a name of lowercase letters, digits and _ that is not a built-in source")
        surfaces = known_surfaces(set(self.tools.surfaces))
        self._mcp_surfaces(surfaces)
        for agent_id, agent in self.agents.items():
            if agent.settled_state_source is not None and agent.settled_state_source not in self.sql_sources:
                raise KeyProblem(
                    ("agents", agent_id, "settled_state_source"),
                    f"unknown sql source {clip(agent.settled_state_source)}; expected one of [sql_sources.*]: "
                    + (", ".join(sorted(self.sql_sources)) or "(none defined)"),
                )
            for tier_name, tier in agent.tiers.items():
                self._tier_references(agent_id, agent, tier_name, tier, surfaces)
        return self

    def _mcp_surfaces(self, surfaces: frozenset[str]) -> None:
        for server, conf in self.tools.mcp.items():
            for glob, declared in conf.surfaces.items():
                unknown = [s for s in declared if s not in surfaces]
                if unknown:
                    where = ("tools", "mcp", server, "surfaces", glob)
                    known = ", ".join(sorted(surfaces))
                    raise KeyProblem(where, f"unknown surface {unknown[0]!r}; expected one of {known} (declare new ones in tools.surfaces)")

    def _tier_references(self, agent_id: str, agent: AgentConfig, tier_name: str, tier: TierConfig, surfaces: set[str] | frozenset[str]) -> None:
        where = ("agents", agent_id, "tiers", tier_name)
        for i, surface in enumerate(tier.binds):
            if surface not in surfaces:
                raise KeyProblem(
                    (*where, "binds", i),
                    f"unknown surface {clip(surface)}; expected one of {', '.join(sorted(surfaces))} (declare new ones in tools.surfaces)",
                )
        for i, source in enumerate(tier.sources):
            if source not in BUILTIN_SOURCES and source not in self.sql_sources:
                raise KeyProblem(
                    (*where, "sources", i),
                    f"unknown source {clip(source)}; expected one of {', '.join(sorted(BUILTIN_SOURCES))} or an [sql_sources.<name>]",
                )
        if tier_name == "whisper":
            for i, rule in enumerate(self.gate.escalate):
                if rule.to not in agent.tiers:
                    raise KeyProblem(("gate", "escalate", i, "to"), f"agent {clip(agent_id)} has no {rule.to} tier to escalate to")
        self._delivery_references(where, tier)
        if tier.model is not None and tier.model not in self.models:
            raise KeyProblem(
                (*where, "model"),
                f"unknown model route {clip(tier.model)}; expected one of [models.*]: " + (", ".join(sorted(self.models)) or "(none defined)"),
            )

    def _delivery_references(self, where: tuple[str, ...], tier: TierConfig) -> None:
        for i, route in enumerate(tier.deliver_to):
            if route not in self.delivery:
                raise KeyProblem(
                    (*where, "deliver_to", i),
                    f"unknown delivery route {clip(route)}; expected one of [delivery.*]: " + (", ".join(sorted(self.delivery)) or "(none defined)"),
                )

    def config_hash(self) -> str:
        """SHA-256 of the effective configuration (after overrides), canonical JSON. Computed once:
        every wake records it, and with a thousand agents it costs tens of milliseconds."""
        if self._hash is None:
            canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
            self._hash = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        return self._hash
