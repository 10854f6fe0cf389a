"""The config's derived views: the paths, schedules and settings other packages read, each
resolved from the validated models (and the environment the loader read once), never from the
environment again.

`ConfigViews` is a mixin of `wake.config.root.Config`; it declares, for the type checker only,
the fields and private attributes it reads.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from memory.config import DEFAULT_DOMAINS, MemoryConfig, Severity
from surfaces.context import ToolSettings
from wake.config.environment import Environment
from wake.config.sections import DEFAULT_SCHEDULES, MEMORY_DIR, PROBES_DIR, TierConfig
from wake.errors import ConfigError

if TYPE_CHECKING:
    from wake.config.sections import AgentConfig, Neo4jConfig, ProbesConfig, RetractionsConfig


class ConfigViews:
    """What is derived from a validated config (paths, schedules, the tools' settings)."""

    if TYPE_CHECKING:
        agents: dict[str, AgentConfig]
        neo4j: Neo4jConfig
        probes: ProbesConfig
        retractions: RetractionsConfig
        state_dir: str | None
        _path: Path
        _environment: Environment
        _tool_settings: ToolSettings | None
        _memory_configs: dict[str, MemoryConfig]
        _memory_paths: dict[str, Path]

    @property
    def path(self) -> Path:
        return self._path

    @property
    def environment(self) -> Environment:
        """The variables the loader read for this config (`wake.config.root.Environment`)."""
        return self._environment

    @property
    def base_dir(self) -> Path:
        return self._path.parent

    def tier(self, agent_id: str, tier: str) -> TierConfig:
        if agent_id not in self.agents:
            raise ConfigError(str(self._path), f"agents.{agent_id}", f"no such agent; known: {', '.join(sorted(self.agents))}")
        agent = self.agents[agent_id]
        if tier not in agent.tiers:
            raise ConfigError(
                str(self._path), f"agents.{agent_id}.tiers.{tier}", f"no such tier; known: {', '.join(agent.tiers)}"
            )
        return agent.tiers[tier]

    def schedule_of(self, agent_id: str, tier: str) -> dict[str, str]:
        """The tier's trigger: its own cron/every, or the default for that tier."""
        conf = self.tier(agent_id, tier)
        if conf.cron:
            return {"cron": conf.cron}
        if conf.every:
            return {"every": conf.every}
        return DEFAULT_SCHEDULES[tier]

    def persona_paths(self, agent_id: str) -> list[Path]:
        return [(self.base_dir / p).resolve() for p in self.agents[agent_id].persona_files]

    def config_relative(self, path: str) -> Path:
        """A path from the config (instructions files, file delivery routes), relative to its directory."""
        return (self.base_dir / path).resolve()

    def workspace_path(self, agent_id: str) -> Path | None:
        """`agents.<id>.workspace` resolved against the config file's directory; None when unset."""
        configured = self.agents[agent_id].workspace
        return (self.base_dir / configured).resolve() if configured is not None else None

    def state_dir_path(self) -> Path:
        """`WAKE_STATE_DIR`, else `state_dir`, else systemd's `$STATE_DIRECTORY`, else XDG state (as the loader read them)."""
        return self._environment.state_dir(self.state_dir)

    def probe_roots(self) -> list[Path]:
        """`[probes] roots` relative to the config file's directory; else `<state_dir>/probes`."""
        if self.probes.roots:
            return [(self.base_dir / r).resolve() for r in self.probes.roots]
        return [self.state_dir_path() / PROBES_DIR]

    def memory_path(self, agent_id: str) -> Path:
        """The agent's memory repository: `agents.<id>.memory.path` relative to the config file's
        directory, else `<state_dir>/memory/<agent id>`. Resolved once per agent (every wake opens it)."""
        found = self._memory_paths.get(agent_id)
        if found is None:
            configured = self.agents[agent_id].memory.path
            if configured:
                found = (self.base_dir / Path(configured).expanduser()).resolve()
            else:
                found = self.state_dir_path() / MEMORY_DIR / agent_id
            self._memory_paths[agent_id] = found
        return found

    def memory_config(self, agent_id: str) -> MemoryConfig:
        """The memory layer's settings for the agent, resolved once: its domains (with the
        configured severities), its extra paths, and the persona a new repository starts with
        (the agent's `persona_files`, so the first wake's persona is the operator's, not a HALT)."""
        if agent_id not in self._memory_configs:
            conf = self.agents[agent_id].memory
            domains = tuple(
                dataclasses.replace(d, severity=Severity(conf.severities[d.name])) if d.name in conf.severities else d
                for d in DEFAULT_DOMAINS
            )
            persona = "\n\n".join(p.read_text(encoding="utf-8").strip() for p in self.persona_paths(agent_id) if p.is_file())
            self._memory_configs[agent_id] = MemoryConfig(domains=domains, allowed_paths=conf.allowed_paths, persona_seed=persona)
        return self._memory_configs[agent_id]

    def tool_settings(self) -> ToolSettings:
        """The values the built-in tools read (`surfaces.context.ToolSettings`), resolved once."""
        if self._tool_settings is None:
            self._tool_settings = ToolSettings(
                falsifier_maturity_days=self.retractions.falsifier_maturity_days,
                graph_neighbors_max=self.neo4j.neighbors_max,
                probe_roots=tuple(self.probe_roots()),
                probe_max_file_bytes=self.probes.max_file_bytes,
                recall={agent_id: agent.recall.settings() for agent_id, agent in self.agents.items()},
                with_workspace=frozenset(a for a in self.agents if self.workspace_path(a) is not None),
                workspaces={a: (path, self.agents[a].verify.head_ttl_s) for a in self.agents
                            if (path := self.workspace_path(a)) is not None},
            )
        return self._tool_settings
