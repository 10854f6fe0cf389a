"""Configuration: one TOML file, validated once into frozen models, then environment overrides.

Where the file comes from, first match wins:

1. `--config PATH` on the command line;
2. `$WAKE_CONFIG`;
3. `./wake.toml`;
4. `$XDG_CONFIG_HOME/wake/wake.toml` (default `~/.config/wake/wake.toml`);
5. `/etc/wake/wake.toml`;
6. the embedded default, `config/wake.toml` of the source tree.

Overrides, applied over the file in this order (later wins):

- `DATABASE_URL` sets `postgres.dsn`; `PGHOST` (with the other libpq `PG*` variables, which
  asyncpg reads itself) selects an external PostgreSQL when no DSN is set;
- `REDIS_URL` sets `redis.url`; `NEO4J_URI` sets `neo4j.uri`; `NEO4J_AUTH` (`user/password`)
  sets the Neo4j credentials;
- `WAKE_STATE_DIR`, `WAKE_LOG_FORMAT`, `WAKE_LOG_LEVEL`;
- `WAKE_<SECTION>__<KEY>[__<KEY>...]` sets any key, for example
  `WAKE_POSTGRES__COMMAND_TIMEOUT_S=5` or `WAKE_AGENTS__DEMO__TIMEZONE=UTC`. The value is read
  as a TOML value when it parses as one (`5`, `true`, `["a"]`), else as a string.

Every malformed input raises `ConfigError` naming the file (or variable), the key path and what
was expected; the CLI turns it into one line on stderr and exit status 78.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import os
import re
import tomllib
import types
import typing
import zoneinfo
from pathlib import Path
from typing import Any, Literal

import pydantic
from apscheduler.triggers.cron import CronTrigger
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from memory import config as memory_config
from surfaces import names as surface_names
from surfaces.context import RecallSettings, ToolSettings
from wake.errors import ConfigError

TIERS: tuple[str, ...] = ("whisper", "surface", "full")
ENV_PREFIX = "WAKE_"
EMBEDDED_DEFAULT = Path(__file__).resolve().parent.parent / "config" / "wake.toml"

DEFAULT_SOURCE_TIMEOUT_MS = 1500
# The built-in arrival sources by name (`wake.arrival.sources.BUILTIN` implements each; a test
# keeps the two the same). Named here so that validating a config needs no source code.
BUILTIN_SOURCES: frozenset[str] = frozenset({
    "identity", "graph", "recent_wakes", "clock", "due_falsifiers", "binding_diff", "living_summaries",
    "provenance_facts", "daybook", "settled_facts", "memory", "cloister", "posture", "context_audit",
})
# The blocks a tier's own keys add (`instructions_file`, `precheck`): not nameable in `sources`,
# and no [sql_sources.<name>] may take their names.
OPERATOR_SOURCES: frozenset[str] = frozenset({"instructions", "precheck"})
PROBES_DIR = "probes"  # under the state directory, when no [probes] roots are configured
DEFAULT_SOURCES: tuple[str, ...] = ("identity", "memory", "cloister", "graph", "clock", "recent_wakes", "binding_diff")
MEMORY_DIR = "memory"  # under the state directory: one repository per agent, memory/<agent id>
# Issue 4's defaults: whisper every 15 minutes, surface hourly, full daily at 03:30 local time.
DEFAULT_SCHEDULES: dict[str, dict[str, str]] = {
    "whisper": {"every": "15m"},
    "surface": {"every": "1h"},
    "full": {"cron": "30 3 * * *"},
}
_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_DURATION_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_QUIET_HOURS = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


def parse_duration_s(text: str) -> int:
    """`"15m"` -> 900. Units: s, m, h, d."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f'expected a duration like "30s", "15m", "1h" or "1d", got {text!r}')
    seconds = int(match.group(1)) * _DURATION_UNITS_S[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"expected a positive duration, got {text!r}")
    return seconds


class PostgresConfig(_Model):
    dsn: str | None = None
    command_timeout_s: float = Field(10.0, gt=0)
    acquire_timeout_s: float = Field(5.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    pool_min_size: int = Field(1, ge=0)
    pool_max_size: int = Field(10, ge=1)
    # Apply pending migrations when `wake up` or `wake daemon` starts (under the advisory lock).
    auto_migrate: bool = True


class RedisConfig(_Model):
    url: str | None = None
    socket_timeout_s: float = Field(5.0, gt=0)


class Neo4jConfig(_Model):
    uri: str | None = None
    user: str = "neo4j"
    # Name of the credential (file in $CREDENTIALS_DIRECTORY, else the upper-cased env variable).
    password_credential: str | None = None
    database: str = "neo4j"
    timeout_s: float = Field(5.0, gt=0)
    # The graph arrival block (docs/graph.md): caps on entities and characters, and how far back
    # a fact or an action still anchors it.
    block_max_nodes: int = Field(20, ge=1, le=500)
    block_max_chars: int = Field(2000, ge=400)
    block_recent_h: int = Field(48, ge=1)
    # graph_neighbors returns at most this many relationships (the total is always exact).
    neighbors_max: int = Field(25, ge=1, le=500)


class LogConfig(_Model):
    format: Literal["auto", "json", "console"] = "auto"
    level: Literal["debug", "info", "warning", "error"] = "info"


class ToolsConfig(_Model):
    modules: tuple[str, ...] = ()
    # Surface names beyond the built-in ones that operator tools may declare and tiers may bind.
    surfaces: tuple[str, ...] = ()
    entry_points: bool = True


class ProbesConfig(_Model):
    # Directories claim probes may read, relative to the config file's directory (like
    # persona_files). Empty: the state directory's `probes/`. A relative probe target resolves
    # against the first root; nothing outside the roots is ever read.
    roots: tuple[str, ...] = ()
    max_file_bytes: int = Field(1_048_576, gt=0)


class RetractionsConfig(_Model):
    # A falsifier is due this many days after its correction (three: long enough for the world to show which way it went).
    falsifier_maturity_days: int = Field(3, ge=0)
    # How many due falsifiers the arrival block shows (and probes); the total is counted.
    due_shown: int = Field(5, ge=1)


# The request fields wake itself sets (the binding, the conversation, the budgets, how tools may
# be called, one JSON reply): a route's `extra_body` may add any other field, never these.
HARNESS_BODY_KEYS = frozenset({
    "model", "messages", "tools", "tool_choice", "functions", "function_call", "max_tokens", "max_completion_tokens",
    "stream", "n",
})


class ModelRoute(_Model):
    base_url: str
    model: str
    # Name of the API key credential: $CREDENTIALS_DIRECTORY/<name>, else env <NAME> upper-cased.
    api_key_credential: str | None = None
    context_window: int = Field(128_000, gt=0)
    input_usd_per_mtok: float = Field(0.0, ge=0)
    output_usd_per_mtok: float = Field(0.0, ge=0)
    # Price of prompt tokens the provider served from its cache; unset means the input price.
    cached_input_usd_per_mtok: float | None = Field(None, ge=0)
    timeout_s: float = Field(60.0, gt=0)
    # Retries on 408, 409, 429, 5xx, timeouts and transport errors (never on other 4xx).
    max_retries: int = Field(4, ge=0)
    # The longest wait between two attempts, whatever Retry-After asks for.
    retry_cap_s: float = Field(30.0, ge=0)
    # Merged into every request body, e.g. {usage = {include = true}} for OpenRouter.
    extra_body: dict[str, Any] = {}
    # The budget's last call: keep the tools with tool_choice "none" (the prompt cache still hits;
    # providers that refuse tool messages without tools accept it), or omit them (for a server
    # that ignores tool_choice, e.g. Ollama).
    summary_tools: Literal["choice_none", "omit"] = "choice_none"
    # A llama.cpp server's root URL: each prompt is counted with its /apply-template and /tokenize
    # before it is sent. Unset: the previous turn's usage.prompt_tokens plus a conservative estimate.
    tokenizer_url: str | None = None

    @field_validator("base_url", "tokenizer_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
        return value

    @field_validator("extra_body")
    @classmethod
    def _no_harness_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(HARNESS_BODY_KEYS.intersection(value))
        if taken:
            raise ValueError(f"{', '.join(taken)} {'is' if len(taken) == 1 else 'are'} set by wake itself and cannot be overridden here")
        return value


class BudgetConfig(_Model):
    max_turns: int = Field(8, ge=1)
    max_tool_calls: int = Field(16, ge=0)
    max_output_tokens: int = Field(4096, ge=1)
    max_cost_usd: float = Field(0.10, ge=0)


class ThinkConfig(_Model):
    """The model loop's limits on tools (budgets are per tier)."""

    tool_timeout_s: float = Field(30.0, gt=0)
    tool_result_max_chars: int = Field(8000, ge=100)
    # The same call (name and arguments) may run this many times in one wake; one more trips it.
    max_repeat_calls: int = Field(3, ge=1)
    summary_max_tokens: int = Field(512, ge=16)


class EscalationRule(_Model):
    """Promote a whisper to a deeper wake when `when` holds for `block` (any block if unset)."""

    when: Literal["present", "changed", "newly_failing"]
    block: str | None = None
    to: Literal["surface", "full"] = "surface"

    @model_validator(mode="after")
    def _block_needed(self) -> EscalationRule:
        if self.when in ("present", "changed") and self.block is None:
            raise ValueError(f"expected a block name for when = {self.when!r}")
        return self


class GateConfig(_Model):
    # Blocks whose `present` result means something is due: the whisper cannot be quiet.
    due_blocks: tuple[str, ...] = ("due_falsifiers",)
    escalate: tuple[EscalationRule, ...] = ()


def parse_listen(text: str) -> tuple[str, int]:
    """`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464` -> (host, port). Port 0 picks a free one.

    Raises ValueError with one line saying what was expected (a config validator can pass it on)."""
    expected = f"expected HOST:PORT such as 127.0.0.1:9464 or [::1]:9464, got {text!r}"
    value = text.strip()
    if value.startswith("["):
        host, sep, port_text = value[1:].partition("]:")
        if not sep:
            raise ValueError(expected)
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{expected}: {host!r} is not an IPv6 address") from None
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep or not host or ":" in host:
            raise ValueError(expected + ("" if ":" not in host else " (write an IPv6 address in brackets)"))
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{expected}: the port must be a number from 0 to 65535")
    return host, int(port_text)


class MetricsConfig(_Model):
    """The daemon's Prometheus endpoint (docs/metrics.md); off unless `listen` is set."""

    # "HOST:PORT", e.g. "127.0.0.1:9464"; served by `wake daemon` only.
    listen: str | None = None

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            parse_listen(value)
        return value


class ConsoleConfig(_Model):
    """The operator console (docs/console.md): `wake console`, and the daemon when `listen` is set."""

    # "HOST:PORT". `wake console` serves on 127.0.0.1:8087 when unset; the daemon only when set.
    # An address other than loopback needs the token (below) for every page.
    listen: str | None = None
    # Read-only: no action (ack, revert, accept, pause, resume, trigger) is offered or accepted.
    read_only: bool = False
    # The token's systemd credential (`$CREDENTIALS_DIRECTORY/<name>`, LoadCredential=), else the
    # environment variable of that name in capitals (WAKE_CONSOLE_TOKEN). Without one, the console
    # serves loopback only, read-only.
    token_credential: str = "wake_console_token"
    # How often the live timeline asks the ledger for new and settled wakes.
    live_poll_s: float = Field(2.0, gt=0)

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            parse_listen(value)
        return value


class EnginesConfig(_Model):
    """The embedded PostgreSQL and Redis (no DSN configured; docs/performance.md)."""

    # After the last wake process using them exits, the engines stay up this long for the next
    # command (no initdb, no restart), then stop themselves. 0: the last one out stops them.
    idle_s: float = Field(300.0, ge=0)


class DaemonConfig(_Model):
    """`wake daemon` (docs/daemon.md)."""

    # SIGTERM: running wakes get this long to finish, then they are cancelled (settled aborted).
    drain_s: float = Field(60.0, gt=0)
    # The agent lease's TTL; its holder renews every TTL/3. A dead holder blocks the agent this long.
    lease_ttl_s: float = Field(60.0, gt=0)
    # How often a replica publishes its heartbeat to Redis (it expires after three beats).
    heartbeat_s: float = Field(10.0, gt=0)
    # A scheduled surface or full wake that finds the agent busy waits this long for the lease
    # before it is recorded `skipped` (busy); a whisper never waits.
    busy_wait_s: float = Field(30.0, ge=0)
    # Wakes this replica runs at once (claim to settle); more due slots queue for a turn instead
    # of all contending for the PostgreSQL pool. Keep it near postgres.pool_max_size.
    max_concurrent_wakes: int = Field(16, ge=1)
    # How often the daemon looks for due one-shot wakes (`wake at`) and due deliveries (the outbox).
    poll_s: float = Field(1.0, gt=0)


class TierConfig(_Model):
    cron: str | None = None
    every: str | None = None
    jitter_s: int = Field(0, ge=0)
    binds: tuple[str, ...]
    sources: tuple[str, ...] = DEFAULT_SOURCES
    source_timeout_ms: int = Field(DEFAULT_SOURCE_TIMEOUT_MS, gt=0)
    model: str | None = None
    budget: BudgetConfig = BudgetConfig()
    skip_quiet_hours: bool | None = None
    catch_up: Literal["one", "skip"] | None = None
    # Operator controls (docs/daemon.md): a Markdown checklist the wake arrives to (relative to the
    # config file), its cache tier; the final answer that means "nothing to report"; the
    # [delivery.<name>] routes a completed wake's final text goes to; how late a scheduled slot
    # may still run (unset: however late); a command run before the model (exit 0 think, 1 quiet).
    instructions_file: str | None = None
    instructions_cache_tier: Literal["static", "stable"] = "stable"
    ok_token: str | None = Field(None, min_length=1)
    deliver_to: tuple[str, ...] = ()
    misfire_grace_s: float | None = Field(None, ge=0)
    precheck: tuple[str, ...] | None = Field(None, min_length=1)
    precheck_timeout_s: float = Field(10.0, gt=0)
    precheck_max_chars: int = Field(4000, ge=100)

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                CronTrigger.from_crontab(value)
            except ValueError as exc:
                raise ValueError(f"expected a 5-field cron expression, got {value!r} ({exc})") from exc
        return value

    @field_validator("every")
    @classmethod
    def _every(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration_s(value)
        return value

    @model_validator(mode="after")
    def _one_trigger(self) -> TierConfig:
        if self.cron is not None and self.every is not None:
            raise ValueError("expected either cron or every, not both")
        return self


# Context values an operator SQL source may pass as parameters ($1, $2, ... in `params` order).
SQL_SOURCE_PARAMS = ("agent_id", "tier", "trigger", "timezone", "now", "local_date", "wake_id")
CacheTierName = Literal["static", "stable", "session", "volatile"]


class SqlSourceConfig(_Model):
    """An operator-defined arrival source: one SELECT, run READ ONLY (docs/facts.md)."""

    sql: str = Field(min_length=1)
    params: tuple[Literal[SQL_SOURCE_PARAMS], ...] = ()  # type: ignore[valid-type]
    cache_tier: CacheTierName = "volatile"
    timeout_ms: int = Field(1000, gt=0)
    max_rows: int = Field(20, ge=1, le=1000)
    template: str = Field(min_length=1)  # one line per row, str.format over the row's columns
    header: str | None = None
    empty_text: str = "(no rows)"
    # Phrases that claim this block's rows are absent ("no new orders"): a wake's final text saying
    # one while the block could not be checked is marked, not taken as evidence (docs/recall.md).
    absence_claims: tuple[str, ...] = ()

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        import string

        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
        except ValueError as exc:
            raise ValueError(f"expected a str.format template such as '{{title}} due {{due_on}}', got {value!r} ({exc})") from exc
        if any(not f or f.isdigit() for f in fields):
            raise ValueError(f"expected named fields only ({{column}}), got {value!r}")
        return value


class ContextConfig(_Model):
    """Context pressure and posture, per agent (docs/context.md). Thresholds are shares of the route's window."""

    policy: Literal["sovereign", "harness"] = "sovereign"
    narrow_at: float = Field(0.70, gt=0, le=1)  # sovereign: max_tokens narrows from here
    remind_at: tuple[float, ...] | None = None  # None: (0.85,) sovereign, (0.80, 0.88) harness
    act_at: float = Field(0.95, gt=0, le=1)  # sovereign: the choice point; harness: automatic compaction
    decline_grace_turns: int = Field(3, ge=0)
    auto_keep_messages: int = Field(8, ge=2)  # harness: the sliding window an automatic compaction keeps
    # What the agent may set for itself (`context_config_set`): thresholds within these bounds.
    agent_min_threshold: float = Field(0.50, gt=0, le=1)
    agent_max_threshold: float = Field(0.97, gt=0, le=1)
    agent_max_grace_turns: int = Field(10, ge=0)
    posture: bool = True
    posture_present_s: int = Field(120, ge=1)
    posture_warm_s: int = Field(1800, ge=1)
    posture_cool_s: int = Field(21600, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> ContextConfig:
        if not self.posture_present_s < self.posture_warm_s < self.posture_cool_s:
            raise ValueError("expected posture_present_s < posture_warm_s < posture_cool_s")
        if self.agent_min_threshold > self.agent_max_threshold:
            raise ValueError("expected agent_min_threshold <= agent_max_threshold")
        if any(not 0 < r <= 1 for r in self.remind_at or ()):
            raise ValueError("expected every remind_at threshold in (0, 1]")
        return self

    def reminders(self) -> tuple[float, ...]:
        if self.remind_at is not None:
            return tuple(sorted(self.remind_at))
        return (0.85,) if self.policy == "sovereign" else (0.80, 0.88)
class DeliveryRoute(_Model):
    """`[delivery.<name>]`: where a completed wake's final text is delivered (docs/daemon.md, "Delivery")."""

    kind: Literal["webhook", "file", "stdout"]
    url: str | None = None  # webhook: POSTed JSON
    # webhook: the credential whose value signs the body (X-Wake-Signature: sha256=<HMAC-SHA256>)
    secret_credential: str | None = None
    timeout_s: float = Field(10.0, gt=0)
    path: str | None = None  # file: JSON lines appended, relative to the config file
    max_attempts: int = Field(8, ge=1)  # then the delivery is `dead` (`wake outbox --failed`)
    backoff_s: float = Field(1.0, ge=0)  # the first wait between attempts; doubles each time
    backoff_max_s: float = Field(300.0, ge=0)

    @model_validator(mode="after")
    def _target(self) -> DeliveryRoute:
        if self.kind == "webhook" and (self.url is None or not self.url.startswith(("http://", "https://"))):
            raise ValueError(f"a webhook route needs url = an http:// or https:// URL, got {self.url!r}")
        if self.kind == "file" and not self.path:
            raise ValueError("a file route needs path = a file to append JSON lines to")
        return self


class RecallConfig(_Model):
    """The agent's `recall` tool (docs/recall.md)."""

    # A PostgreSQL text search configuration; 'simple' and 'english' are indexed (migration 0010).
    dictionary: str = "simple"
    continuing_candidates: int = Field(24, ge=1, le=500)
    continuing_cap: int = Field(6, ge=1, le=50)
    ordinary_candidates: int = Field(8, ge=1, le=500)
    ordinary_cap: int = Field(3, ge=1, le=50)
    recent_entries: int = Field(3, ge=0, le=100)

    @field_validator("dictionary")
    @classmethod
    def _dictionary(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?", value):
            raise ValueError(f"expected a text search configuration name such as 'simple' or 'english', got {value!r}")
        return value

    def settings(self) -> RecallSettings:
        return RecallSettings(**self.model_dump())
class VerifyConfig(_Model):
    # One retrieval's budget for checking the facts block's code anchors against the workspace
    # (waiting for its fingerprint included); what is not decided by then is shown inconclusive.
    budget_ms: float = Field(50.0, gt=0, le=60_000)
    # HEAD is re-resolved at most this often: within it a moved HEAD is not seen yet.
    head_ttl_s: float = Field(30.0, ge=0)

SeverityName = Literal["HALT", "WARN", "LOG"]


class MemoryAgentConfig(_Model):
    """The agent's memory repository and its canary (docs/memory.md)."""

    # Off: no repository, no canary; the memory tools answer that memory is off, the blocks are disabled.
    enabled: bool = True
    # The repository's work tree, relative to the config file's directory; default <state_dir>/memory/<agent id>.
    path: str | None = None
    # Prefixes (a directory ending in "/", or a file) a write may use besides the layout's domains.
    allowed_paths: tuple[str, ...] = ()
    # A domain's severity instead of its default (persona, human, project, state, reference, journal).
    severities: dict[str, SeverityName] = {}
    # The `memory` block's size cap (its header always gives the exact totals).
    block_max_chars: int = Field(4000, ge=400)

    @field_validator("allowed_paths")
    @classmethod
    def _prefixes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for prefix in value:
            if not prefix or prefix.startswith("/") or ".." in prefix.split("/") or prefix.lower().startswith(".git"):
                raise ValueError(f'expected relative prefixes such as "notes/" inside the repository, got {prefix!r}')
        return value

    @field_validator("severities")
    @classmethod
    def _domains(cls, value: dict[str, str]) -> dict[str, str]:
        known = [d.name for d in memory_config.DEFAULT_DOMAINS]
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise _KeyError((unknown[0],), f"unknown memory domain {unknown[0]!r}; expected one of {', '.join(known)}")
        return value


class AgentConfig(_Model):
    timezone: str = "UTC"
    persona_files: tuple[str, ...] = ()
    quiet_hours: str | None = None
    daily_cost_cap_usd: float | None = Field(None, ge=0)
    # An [sql_sources.<name>] whose first row is the settled-facts block's "latest settled state";
    # none: the built-in `settled_state` table.
    settled_state_source: str | None = None
    context: ContextConfig = Field(default_factory=ContextConfig)
    recall: RecallConfig = RecallConfig()
    # The git repository the agent's facts are checked against (verify-on-read), relative to the
    # config file's directory. Only its form is checked here: whether it is a repository is the
    # check's own typed answer at each read, never a config error.
    workspace: str | None = None
    verify: VerifyConfig = VerifyConfig()
    memory: MemoryAgentConfig = MemoryAgentConfig()
    tiers: dict[str, TierConfig]

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f'expected an IANA timezone such as "Europe/Stockholm", got {value!r}') from exc
        return value

    @field_validator("quiet_hours")
    @classmethod
    def _quiet(cls, value: str | None) -> str | None:
        if value is not None and not _QUIET_HOURS.match(value):
            raise ValueError(f'expected "HH:MM-HH:MM" in 24-hour time, got {value!r}')
        return value

    @field_validator("workspace")
    @classmethod
    def _workspace(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\x00" in value):
            raise ValueError(f"expected the path of a git repository (relative to this file), got {value!r}")
        return value

    @field_validator("tiers")
    @classmethod
    def _tier_names(cls, value: dict[str, TierConfig]) -> dict[str, TierConfig]:
        unknown = sorted(set(value) - set(TIERS))
        if unknown:
            raise _KeyError((unknown[0],), f"unknown tier {unknown[0]!r}; expected one of {', '.join(TIERS)}")
        if not value:
            raise ValueError("expected at least one tier")
        return value


class Config(_Model):
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
    agents: dict[str, AgentConfig]

    _path: Path = PrivateAttr(default=Path("."))
    _hash: str | None = PrivateAttr(default=None)
    _tool_settings: ToolSettings | None = PrivateAttr(default=None)
    _memory_configs: dict[str, memory_config.MemoryConfig] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _references(self) -> Config:
        if not self.agents:
            raise _KeyError(("agents",), "expected at least one agent table [agents.<id>]")
        for name in self.sql_sources:
            if name in BUILTIN_SOURCES | OPERATOR_SOURCES or not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", name):
                raise _KeyError(("sql_sources", name), "expected a name of lowercase letters, digits and _ that is not a built-in source")
        surfaces = surface_names.known_surfaces(set(self.tools.surfaces))
        for agent_id, agent in self.agents.items():
            if agent.settled_state_source is not None and agent.settled_state_source not in self.sql_sources:
                raise _KeyError(
                    ("agents", agent_id, "settled_state_source"),
                    f"unknown sql source {agent.settled_state_source!r}; expected one of [sql_sources.*]: "
                    + (", ".join(sorted(self.sql_sources)) or "(none defined)"),
                )
            for tier_name, tier in agent.tiers.items():
                self._tier_references(agent_id, agent, tier_name, tier, surfaces)
        return self

    def _tier_references(self, agent_id: str, agent: AgentConfig, tier_name: str, tier: TierConfig, surfaces: set[str] | frozenset[str]) -> None:
        where = ("agents", agent_id, "tiers", tier_name)
        for i, surface in enumerate(tier.binds):
            if surface not in surfaces:
                raise _KeyError(
                    (*where, "binds", i),
                    f"unknown surface {surface!r}; expected one of {', '.join(sorted(surfaces))} (declare new ones in tools.surfaces)",
                )
        for i, source in enumerate(tier.sources):
            if source not in BUILTIN_SOURCES and source not in self.sql_sources:
                raise _KeyError(
                    (*where, "sources", i),
                    f"unknown source {source!r}; expected one of {', '.join(sorted(BUILTIN_SOURCES))} or an [sql_sources.<name>]",
                )
        if tier_name == "whisper":
            for i, rule in enumerate(self.gate.escalate):
                if rule.to not in agent.tiers:
                    raise _KeyError(("gate", "escalate", i, "to"), f"agent {agent_id!r} has no {rule.to} tier to escalate to")
        self._delivery_references(where, tier)
        if tier.model is not None and tier.model not in self.models:
            raise _KeyError(
                (*where, "model"),
                f"unknown model route {tier.model!r}; expected one of [models.*]: " + (", ".join(sorted(self.models)) or "(none defined)"),
            )

    def _delivery_references(self, where: tuple[str, ...], tier: TierConfig) -> None:
        for i, route in enumerate(tier.deliver_to):
            if route not in self.delivery:
                raise _KeyError(
                    (*where, "deliver_to", i),
                    f"unknown delivery route {route!r}; expected one of [delivery.*]: " + (", ".join(sorted(self.delivery)) or "(none defined)"),
                )

    # -- derived views ------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_dir(self) -> Path:
        return self._path.parent

    def config_hash(self) -> str:
        """SHA-256 of the effective configuration (after overrides), canonical JSON. Computed once:
        every wake records it, and with a thousand agents it costs tens of milliseconds."""
        if self._hash is None:
            canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
            self._hash = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        return self._hash

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
        return resolve_state_dir(self.state_dir)

    def probe_roots(self) -> list[Path]:
        """`[probes] roots` relative to the config file's directory; else `<state_dir>/probes`."""
        if self.probes.roots:
            return [(self.base_dir / r).resolve() for r in self.probes.roots]
        return [self.state_dir_path() / PROBES_DIR]

    def memory_path(self, agent_id: str) -> Path:
        """The agent's memory repository: `agents.<id>.memory.path` relative to the config file's
        directory, else `<state_dir>/memory/<agent id>`."""
        configured = self.agents[agent_id].memory.path
        if configured:
            return (self.base_dir / Path(configured).expanduser()).resolve()
        return self.state_dir_path() / MEMORY_DIR / agent_id

    def memory_config(self, agent_id: str) -> memory_config.MemoryConfig:
        """The memory layer's settings for the agent, resolved once: its domains (with the
        configured severities), its extra paths, and the persona a new repository starts with
        (the agent's `persona_files`, so the first wake's persona is the operator's, not a HALT)."""
        if agent_id not in self._memory_configs:
            conf = self.agents[agent_id].memory
            domains = tuple(
                dataclasses.replace(d, severity=memory_config.Severity(conf.severities[d.name])) if d.name in conf.severities else d
                for d in memory_config.DEFAULT_DOMAINS
            )
            persona = "\n\n".join(p.read_text(encoding="utf-8").strip() for p in self.persona_paths(agent_id) if p.is_file())
            self._memory_configs[agent_id] = memory_config.MemoryConfig(domains=domains, allowed_paths=conf.allowed_paths, persona_seed=persona)
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
            )
        return self._tool_settings


class _KeyError(ValueError):
    """Raised inside validators to point at a key path below the validated value."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


# -- state directory ---------------------------------------------------------------------------


def resolve_state_dir(configured: str | None) -> Path:
    """`WAKE_STATE_DIR`, else `state_dir`, else systemd's `$STATE_DIRECTORY`, else XDG state."""
    explicit = os.environ.get("WAKE_STATE_DIR") or configured
    if explicit:
        return Path(explicit).expanduser().resolve()
    systemd = os.environ.get("STATE_DIRECTORY")
    if systemd:
        return Path(systemd.split(":")[0])
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "wake"


# -- lookup and loading ------------------------------------------------------------------------


def candidate_paths(explicit: str | os.PathLike[str] | None) -> list[tuple[Path, str]]:
    """Where a config file is looked for, in order, with the reason for each place."""
    if explicit:
        return [(Path(explicit), "--config")]
    if os.environ.get("WAKE_CONFIG"):
        return [(Path(os.environ["WAKE_CONFIG"]), "WAKE_CONFIG")]
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [
        (Path("wake.toml"), "current directory"),
        (xdg / "wake" / "wake.toml", "XDG config"),
        (Path("/etc/wake/wake.toml"), "system"),
        (EMBEDDED_DEFAULT, "embedded default"),
    ]


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    candidates = candidate_paths(explicit)
    for path, why in candidates:
        if path.is_file():
            return path.resolve()
        if why in ("--config", "WAKE_CONFIG"):
            raise ConfigError(str(path), "(file)", f"expected a readable TOML file (named by {why}); it does not exist")
    tried = ", ".join(str(p) for p, _ in candidates)
    raise ConfigError("(no file)", "(file)", f"expected a config file in one of: {tried}")


def load_config(explicit: str | os.PathLike[str] | None = None, *, environ: typing.Mapping[str, str] | None = None) -> Config:
    """Find, parse, override and validate the configuration."""
    path = find_config(explicit)
    return load_config_file(path, environ=os.environ if environ is None else environ)


def load_config_file(path: Path, *, environ: typing.Mapping[str, str]) -> Config:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "(file)", f"expected valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "(file)", f"expected a readable UTF-8 file: {exc}") from exc
    origins: dict[tuple[str, ...], str] = {}
    _apply_overrides(raw, environ, origins)
    try:
        config = Config.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise _config_error(path, exc, origins) from None
    config._path = path.resolve()
    return config


def _set(raw: dict[str, Any], keys: tuple[str, ...], value: Any, origin: str, origins: dict[tuple[str, ...], str]) -> None:
    node = raw
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(origin, ".".join(keys), f"expected {key!r} to be a table in the file")
        node = child
    node[keys[-1]] = value
    origins[keys] = origin


def _toml_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _apply_overrides(raw: dict[str, Any], environ: typing.Mapping[str, str], origins: dict[tuple[str, ...], str]) -> None:
    if environ.get("DATABASE_URL"):
        _set(raw, ("postgres", "dsn"), environ["DATABASE_URL"], "DATABASE_URL", origins)
    elif environ.get("PGHOST") and not raw.get("postgres", {}).get("dsn"):
        # asyncpg reads PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE itself from an empty DSN.
        _set(raw, ("postgres", "dsn"), "postgresql://", "PGHOST", origins)
    named: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
        ("REDIS_URL", ("redis", "url"), environ.get("REDIS_URL")),
        ("NEO4J_URI", ("neo4j", "uri"), environ.get("NEO4J_URI")),
        ("NEO4J_AUTH", ("neo4j", "user"), environ.get("NEO4J_AUTH", "").partition("/")[0]),  # the password is read, never stored
        ("WAKE_LOG_FORMAT", ("log", "format"), environ.get("WAKE_LOG_FORMAT")),
        ("WAKE_LOG_LEVEL", ("log", "level"), environ.get("WAKE_LOG_LEVEL", "").lower()),
    )
    for variable, keys, value in named:
        if environ.get(variable):
            _set(raw, keys, value, variable, origins)
    for name in sorted(environ):
        if name.startswith(ENV_PREFIX) and "__" in name:
            path = tuple(k.lower() for k in name[len(ENV_PREFIX) :].split("__"))
            if not all(path):
                raise ConfigError(name, name, "expected WAKE_<SECTION>__<KEY> with non-empty parts")
            _set(raw, path, _toml_value(environ[name]), name, origins)


# -- error messages ----------------------------------------------------------------------------

_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "string": "a string",
    "str": "a string",
    "list": "an array",
    "tuple": "an array",
    "dict": "a table",
    "model": "a table",
}


def _config_error(path: Path, exc: pydantic.ValidationError, origins: dict[tuple[str, ...], str]) -> ConfigError:
    """The first problem as the error; every further one on a line of its own below it."""
    problems = [_problem(path, error, origins) for error in exc.errors(include_url=False)]
    first = ConfigError(*problems[0])
    lines = list(dict.fromkeys(str(ConfigError(*p)) for p in problems))  # in order, each once
    if len(lines) > 1:
        first.args = ("\n  ".join(lines),)
    return first


def _problem(path: Path, error: Any, origins: dict[tuple[str, ...], str]) -> tuple[str, str, str]:
    """(source, key, expected) of one validation error."""
    ctx_error = (error.get("ctx") or {}).get("error")
    loc: tuple[str | int, ...] = tuple(error["loc"])
    if isinstance(ctx_error, _KeyError):
        loc = loc + ctx_error.loc
        expected = ctx_error.message
    else:
        expected = _expected(error, loc)
    key = ".".join(str(part) for part in loc) or "(top level)"
    source = str(path)
    str_loc = tuple(str(part) for part in loc)
    for n in range(len(str_loc), 0, -1):
        if str_loc[:n] in origins:
            source = f"{origins[str_loc[:n]]} (over {path})"
            break
    return source, key, expected


def _expected(error: Any, loc: tuple[str | int, ...]) -> str:
    kind: str = error["type"]
    got = error.get("input")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        return f"unknown key; expected one of: {', '.join(allowed)}" if allowed else "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind in ("value_error", "assertion_error"):
        return str(error["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        return f"{error['msg'].replace('Input should be', 'expected')}, got {got!r}"
    for prefix, words in _TYPE_WORDS.items():
        if kind.startswith(prefix):
            return f"expected {words}, got {got!r} ({type(got).__name__})"
    return f"{error['msg']}, got {got!r}"


def _allowed_keys(loc: tuple[str | int, ...]) -> list[str]:
    """The field names of the model found at `loc`, walking through dicts and tuples."""
    annotation: Any = Config
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return []
            annotation = field.annotation
        elif typing.get_origin(annotation) in (dict, tuple, list):
            annotation = typing.get_args(annotation)[-1 if typing.get_origin(annotation) is dict else 0]
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """`X | None` -> X."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation

