"""Configuration: one TOML file, validated once into frozen models, then environment overrides.

The package holds the config's parts, one concern a module:

- `values`: the value checks the models share (durations, addresses, agent ids, URLs, the bound
  on every duration, `clip` for echoed values);
- `sections`: one frozen model per table of the file;
- `channels`: the chat and mail channels' checks (Apprise URLs, templates), `[console]`, `[inbox]`;
- `root`: `Config`, the checks that span sections;
- `environment`: the variables a config was loaded under, as data;
- `views`: what is derived from a config (paths, schedules, the tools' settings);
- `loader`: finding the file, the overrides, and the only reads of the environment;
- `messages`: a validation error as one line per problem.

Importers use this package's names (`from wake.config import Config, load_config`).
"""

from __future__ import annotations

from wake.config.channels import DEDUPLICATING_SCHEMES, TEMPLATE_FIELDS, InboxConfig
from wake.config.environment import Environment
from wake.config.loader import (
    EMBEDDED_DEFAULT,
    ENV_PREFIX,
    candidate_paths,
    find_config,
    load_config,
    load_config_file,
    log_settings,
    read_environment,
    resolve_state_dir,
)
from wake.config.root import Config
from wake.config.sections import (
    BUILTIN_SOURCES,
    DEFAULT_SCHEDULES,
    DEFAULT_SOURCE_TIMEOUT_MS,
    DEFAULT_SOURCES,
    HARNESS_BODY_KEYS,
    MEMORY_DIR,
    OPERATOR_SOURCES,
    PROBES_DIR,
    SQL_SOURCE_PARAMS,
    TIERS,
    TOOL_CHOICES,
    AgentConfig,
    BudgetConfig,
    CacheTierName,
    ConsoleConfig,
    ContextConfig,
    DaemonConfig,
    DeliveryRoute,
    EnginesConfig,
    EscalationRule,
    GateConfig,
    LogConfig,
    MemoryAgentConfig,
    MetricsConfig,
    ModelRoute,
    Neo4jConfig,
    PostgresConfig,
    ProbesConfig,
    RecallConfig,
    RedisConfig,
    RetractionsConfig,
    SeverityName,
    SqlSourceConfig,
    ThinkConfig,
    TierConfig,
    ToolChoice,
    ToolsConfig,
    VerifyConfig,
)
from wake.config.values import (
    AGENT_ID_PATTERN,
    CLIP_CHARS,
    MAX_DURATION_S,
    check_agent_id,
    check_http_url,
    clip,
    parse_duration_s,
    parse_listen,
    plural,
    unstorable,
)

__all__ = [
    "AGENT_ID_PATTERN", "BUILTIN_SOURCES", "CLIP_CHARS", "DEFAULT_SCHEDULES", "DEFAULT_SOURCES", "DEFAULT_SOURCE_TIMEOUT_MS",
    "EMBEDDED_DEFAULT", "ENV_PREFIX", "HARNESS_BODY_KEYS", "MAX_DURATION_S", "MEMORY_DIR", "OPERATOR_SOURCES", "PROBES_DIR",
    "SQL_SOURCE_PARAMS", "TIERS", "AgentConfig", "BudgetConfig", "CacheTierName", "Config", "ContextConfig", "DaemonConfig",
    "DeliveryRoute", "EnginesConfig", "Environment", "EscalationRule", "GateConfig", "LogConfig", "MemoryAgentConfig",
    "ConsoleConfig", "MetricsConfig", "ModelRoute", "Neo4jConfig", "PostgresConfig", "ProbesConfig", "RecallConfig", "RedisConfig",
    "RetractionsConfig", "SeverityName", "SqlSourceConfig", "ThinkConfig", "TierConfig", "ToolChoice", "TOOL_CHOICES", "ToolsConfig", "VerifyConfig",
    "DEDUPLICATING_SCHEMES", "InboxConfig", "TEMPLATE_FIELDS",
    "candidate_paths", "check_agent_id", "check_http_url", "clip", "find_config", "load_config", "load_config_file",
    "log_settings", "parse_duration_s", "parse_listen", "plural", "read_environment", "resolve_state_dir", "unstorable",
]
