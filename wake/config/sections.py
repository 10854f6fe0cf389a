"""The config's sections: one frozen model per table of the TOML file, each validating its own keys.

Cross-references between sections (a tier's sources, surfaces, routes) are the root's
(`wake.config.root.Config`); reading the file and the environment is the loader's.
"""

from __future__ import annotations

import re
import string
import zoneinfo
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ledgers.vocab import Tier
from memory.config import DEFAULT_DOMAINS
from surfaces.context import RecallSettings, ToolSettings
from wake.config import channels, hours
from wake.config.mcp import SERVER_NAME, FlowLabel, McpServerConfig
from wake.config.values import (
    MAX_CONCURRENT_WAKES,
    MAX_POOL_SIZE,
    NEO4J_SCHEMES,
    POSTGRES_SCHEMES,
    REDIS_SCHEMES,
    _Model,
    check_http_url,
    check_scheme,
    clip,
    duration_value,
    parse_duration_s,
    parse_listen,
    unstorable,
)
from wake.errors import KeyProblem

TIERS: tuple[str, ...] = tuple(Tier)

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
DEFAULT_APPROVAL_TTL_S = 7 * 86400  # [tools] approval_ttl
PROBES_DIR = "probes"  # under the state directory, when no [probes] roots are configured
DEFAULT_SOURCES: tuple[str, ...] = ("identity", "memory", "cloister", "graph", "clock", "recent_wakes", "binding_diff")
MEMORY_DIR = "memory"  # under the state directory: one repository per agent, memory/<agent id>
# A tier with no cron or every: whisper every 15 minutes, surface hourly, full daily at 03:30 local time.
DEFAULT_SCHEDULES: dict[str, dict[str, str]] = {
    "whisper": {"every": "15m"},
    "surface": {"every": "1h"},
    "full": {"cron": "30 3 * * *"},
}
# A credential's name: a file name in $CREDENTIALS_DIRECTORY (no path) and an environment variable's.
CREDENTIAL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_QUIET_HOURS = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


# The defaults of the values the built-in tools read are the tools' own (surfaces.context).
_TOOLS = ToolSettings()


class PostgresConfig(_Model):
    dsn: str | None = None  # postgresql:// or postgres://
    command_timeout_s: float = Field(10.0, gt=0)
    acquire_timeout_s: float = Field(5.0, gt=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    pool_min_size: int = Field(1, ge=0, le=MAX_POOL_SIZE)
    pool_max_size: int = Field(10, ge=1, le=MAX_POOL_SIZE)
    # Apply pending migrations when `wake up` or `wake daemon` starts (each file under the advisory lock).
    auto_migrate: bool = True
    # "transaction" when `dsn` reaches PostgreSQL through a pooler in transaction mode (PgBouncer's
    # pool_mode = transaction): no prepared statement outlives its transaction and no setting is
    # sent at login (docs/configuration.md, "Through a connection pooler"). "none": a direct server.
    pooler: Literal["none", "transaction"] = "none"

    @field_validator("dsn")
    @classmethod
    def _dsn(cls, value: str | None) -> str | None:
        return None if value is None else check_scheme(value, POSTGRES_SCHEMES, "a PostgreSQL DSN")


class RedisConfig(_Model):
    url: str | None = None  # redis://, rediss:// or unix://
    # Redis through Sentinel (docs/design.md, "Redis through Sentinel"): the sentinels' HOST:PORT and
    # the name they monitor the primary under; the client asks them for the primary and asks again
    # after a failover. Either these two or `url`, never both.
    sentinels: tuple[str, ...] = ()
    master_name: str | None = None
    # With sentinels, the names of two credentials (a file in $CREDENTIALS_DIRECTORY, else the
    # upper-cased environment variable): the primary's password (its `requirepass`, which its
    # replicas share) and the sentinels' own (`requirepass` in sentinel.conf). A URL carries its own.
    password_credential: str | None = None
    sentinel_password_credential: str | None = None
    socket_timeout_s: float = Field(5.0, gt=0)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_scheme(value, REDIS_SCHEMES, "a Redis URL")

    @field_validator("sentinels")
    @classmethod
    def _sentinels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            _, port = parse_listen(text)
            if port == 0:
                raise ValueError(f"expected a sentinel's HOST:PORT with a port from 1 to 65535, got {clip(text)}")
        if len(set(value)) != len(value):
            raise ValueError(f"expected each sentinel once, got {clip(list(value))}")
        return value

    @field_validator("master_name")
    @classmethod
    def _master_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or any(c.isspace() for c in value) or unstorable(value, single_line=True)):
            raise ValueError(f"expected the name the sentinels monitor the primary under (no spaces), got {clip(value)}")
        return value

    @model_validator(mode="after")
    def _one_way_in(self) -> RedisConfig:
        if self.sentinels and self.url is not None:
            raise ValueError("expected either url or sentinels (with master_name), not both")
        if bool(self.sentinels) != (self.master_name is not None):
            raise ValueError("expected sentinels and master_name together (the sentinels' HOST:PORT and the name they monitor)")
        if not self.sentinels and (self.password_credential or self.sentinel_password_credential):
            raise ValueError("expected password_credential and sentinel_password_credential only with sentinels (a url carries its password)")
        return self

    @field_validator("password_credential", "sentinel_password_credential")
    @classmethod
    def _credential(cls, value: str | None) -> str | None:
        if value is not None and not CREDENTIAL_NAME.fullmatch(value):
            raise ValueError(f"expected a credential's name (letters, digits, '_', '-' or '.'), got {clip(value)}")
        return value

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """The sentinels as (host, port) pairs, as redis-py's `Sentinel` takes them."""
        return [parse_listen(text) for text in self.sentinels]


class Neo4jConfig(_Model):
    uri: str | None = None  # bolt://, neo4j:// (and their +s, +ssc forms)

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        return None if value is None else check_scheme(value, NEO4J_SCHEMES, "a Neo4j URI")

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
    neighbors_max: int = Field(_TOOLS.graph_neighbors_max, ge=1, le=500)


class LogConfig(_Model):
    format: Literal["auto", "json", "console"] = "auto"
    level: Literal["debug", "info", "warning", "error"] = "info"


class ToolsConfig(_Model):
    modules: tuple[str, ...] = ()
    # Surface names beyond the built-in ones that operator tools may declare and tiers may bind.
    surfaces: tuple[str, ...] = ()
    entry_points: bool = True
    # Globs over tool names (an MCP tool's `server__tool`) whose calls wait for an operator's
    # decision instead of running in the wake that made them (docs/approvals.md).
    requires_approval: tuple[str, ...] = ()
    # How long such a call waits for a decision: seconds, or a duration ("7d"); a call still pending
    # after it is `expired` and never runs (docs/approvals.md, "Expiry").
    approval_ttl: int = Field(DEFAULT_APPROVAL_TTL_S, gt=0)
    mcp: dict[str, McpServerConfig] = {}  # [tools.mcp.<server>]: MCP servers (wake/config/mcp.py)
    # Globs over tool names (an MCP tool's `server__tool`) -> the flow labels those tools carry
    # instead of their own; and what a tier whose binding holds all three labels gets: refuse
    # (its egress tools are not bound), warn (bound, a finding), off (docs/tools.md, "Toxic flows").
    flows: dict[str, tuple[FlowLabel, ...]] = {}
    toxic_flows: Literal["refuse", "warn", "off"] = "warn"

    @field_validator("approval_ttl", mode="before")
    @classmethod
    def _approval_ttl(cls, value: Any) -> Any:
        return duration_value(value)

    @field_validator("mcp")
    @classmethod
    def _mcp_names(cls, value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in value:
            if not SERVER_NAME.match(name):
                raise KeyProblem((name,), "expected a server name of lowercase letters, digits and - (no _), at most 32 characters")
        return value


class ProbesConfig(_Model):
    # Directories claim probes may read, relative to the config file's directory (like
    # persona_files). Empty: the state directory's `probes/`. A relative probe target resolves
    # against the first root; nothing outside the roots is ever read.
    roots: tuple[str, ...] = ()
    max_file_bytes: int = Field(_TOOLS.probe_max_file_bytes, gt=0)


class RetractionsConfig(_Model):
    # A falsifier is due this many days after its correction (three: long enough for the world to show which way it went).
    falsifier_maturity_days: int = Field(_TOOLS.falsifier_maturity_days, ge=0)
    # How many due falsifiers the arrival block shows (and probes); the total is counted.
    due_shown: int = Field(5, ge=1)


# The request fields wake itself sets (the binding, the conversation, the budgets, how tools may
# be called, one JSON reply): a route's `extra_body` may add any other field, never these.
HARNESS_BODY_KEYS = frozenset({
    "model", "messages", "tools", "tool_choice", "functions", "function_call", "max_tokens", "max_completion_tokens",
    "stream", "n", "response_format",
})


# A route of `kind = "embedded"` (docs/model.md, "The embedded model"): the llama-server that
# `wake model fetch` built, started on loopback by the process that first calls it. What it leaves
# unset is what suits SmolLM2-135M on it: the server's context, a CPU's patience, calls through a
# JSON schema (it does not call natively), greedy decoding.
EMBEDDED_DEFAULTS: dict[str, Any] = {
    "model": "smollm2-135m", "context_window": 8192, "timeout_s": 300, "max_retries": 0, "tool_calls": "json_schema",
    "extra_body": {"temperature": 0},
}
EMBEDDED_MODELS = ("smollm2-135m", "gemma3-270m")  # wake.model.embedded.MODELS


class ModelRoute(_Model):
    # `http`: an OpenAI-compatible server at base_url; `embedded`: the cached llama-server, started
    # for this process on loopback (base_url and tokenizer_url are then its own, never configured).
    kind: Literal["http", "embedded"] = "http"
    base_url: str | None = None
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
    # How the model calls tools: the server's native tool calls, or one JSON answer the server
    # holds to a schema of the binding (`response_format`; wake.think.structured) for a server or
    # model that cannot be trusted with native calls. Either way every call goes through the same
    # binding, schema check, refusal and fence.
    tool_calls: Literal["native", "json_schema"] = "native"

    @model_validator(mode="before")
    @classmethod
    def _embedded_defaults(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("kind") == "embedded":
            return {**EMBEDDED_DEFAULTS, **value}
        return value

    @field_validator("base_url", "tokenizer_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)

    @model_validator(mode="after")
    def _where(self) -> ModelRoute:
        if self.kind == "http" and self.base_url is None:
            raise ValueError("expected base_url (an OpenAI-compatible endpoint), or kind = \"embedded\" for the model `wake model fetch` builds")
        if self.kind == "embedded":
            if self.base_url is not None or self.tokenizer_url is not None:
                raise ValueError("an embedded route's base_url and tokenizer_url are its own server's: leave them out")
            if self.model not in EMBEDDED_MODELS:
                raise ValueError(f"an embedded route's model is one of {', '.join(EMBEDDED_MODELS)}, not {clip(self.model)}")
        return self

    def url(self) -> str:
        """The base URL of an http route (an embedded one's is known once its server runs: `wake.think.client`)."""
        assert self.base_url is not None, "an embedded route's URL comes from its server"
        return self.base_url

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
    # The transcript stores each message and each call's arguments up to this many characters
    # (the arrival's messages whole), cut with a marker that states the cap.
    transcript_max_chars: int = Field(65_536, ge=1000)


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
    # A login's session ends at logout, when the console restarts, or this long after the login.
    session_ttl_s: float = Field(12 * 3600.0, gt=0, le=30 * 86400)
    # The names a request's Host may give besides the listen address, localhost, 127.0.0.1, [::1]
    # and the host of `url`; any other is answered 421 (a DNS-rebinding page reads nothing).
    hosts: list[str] = Field(default_factory=list, max_length=100)
    # Where the console is reached from outside, e.g. "https://wake.example.org": a delivered
    # message's {link} is <url>/wakes/<wake id> (docs/channels.md).
    url: str | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)

    def wake_link(self, wake_id: str) -> str:
        return f"{self.url.rstrip('/')}/wakes/{wake_id}" if self.url else ""

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(r"\[?[A-Za-z0-9.:_-]{1,253}\]?", name):
                raise ValueError(f"expected host names such as wake.example.org, got {clip(name)}")
        return value

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
    max_concurrent_wakes: int = Field(16, ge=1, le=MAX_CONCURRENT_WAKES)
    # How often the daemon looks for due one-shot wakes (`wake at`) and due deliveries (the outbox).
    poll_s: float = Field(1.0, gt=0)
    # Which replica schedules which agent: `rendezvous` gives each agent to one live replica by
    # rendezvous hashing over the heartbeats (docs/design.md, Scale-out); `every_replica` has
    # every replica schedule every agent and race for each slot's claim (the design before it,
    # kept for the comparison in bench/replicas.py).
    ownership: Literal["rendezvous", "every_replica"] = "rendezvous"
    # How often the incident watch reads each tier's newest settled row (the
    # wake_last_settled_timestamp_seconds gauge), runs the dead-man check and counts the open
    # incidents (docs/incidents.md).
    incident_watch_s: float = Field(30.0, gt=0, le=3600)
    # The daemon's event loop: `uvloop` (libuv's loop, in C: a wake at 16 at once costs the process
    # about a tenth less CPU, docs/performance.md) or `asyncio` (the standard library's, the way
    # back should uvloop misbehave on a platform). The CLI's other commands run on asyncio's.
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"


class TierMemoryConfig(_Model):
    """`agents.<id>.tiers.<tier>.memory`: whether the tier may write the agent's memory. None:
    a whisper may not (it reads), the deeper tiers may."""

    writable: bool | None = None


TOOL_CHOICES = ("auto", "required", "none")


class ToolChoice(_Model):
    """What a wake's model turns may do with the binding: `auto` (call or answer), `required`
    (call a tool), `none` (answer), or one bound tool by name; the first turn and the later ones
    apart, so a wake can be made to act before it speaks. A name is checked against the tier's
    binding when the registry is built (`wake.run.session.check_tool_choices`, docs/model.md)."""

    first: str = "auto"
    later: str = "auto"

    @model_validator(mode="before")
    @classmethod
    def _one_for_both(cls, value: Any) -> Any:
        return {"first": value, "later": value} if isinstance(value, str) else value

    @field_validator("first", "later")
    @classmethod
    def _choice(cls, value: str) -> str:
        if value not in TOOL_CHOICES and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", value):
            raise ValueError(f"expected auto, required, none or a tool's name, got {clip(value)}")
        return value

    def names(self) -> set[str]:
        return {c for c in (self.first, self.later) if c not in TOOL_CHOICES}


class TierConfig(_Model):
    cron: str | None = None
    every: str | None = None
    jitter_s: int = Field(0, ge=0)
    binds: tuple[str, ...]
    sources: tuple[str, ...] = DEFAULT_SOURCES
    source_timeout_ms: int = Field(DEFAULT_SOURCE_TIMEOUT_MS, gt=0)
    model: str | None = None
    budget: BudgetConfig = BudgetConfig()
    tool_choice: ToolChoice = ToolChoice()
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
    # When the tier's slots may run (`wake.config.hours`): a slot outside every window is claimed
    # and recorded `skipped` (inactive_hours), like a paused one. Empty: always.
    active_hours: tuple[str, ...] = ()
    # After this many consecutive failing rows (failed, aborted, abandoned, missed) the tier is
    # paused, the reason naming its incident (docs/incidents.md). Unset: never.
    pause_after_failures: int | None = Field(None, ge=1)
    memory: TierMemoryConfig = TierMemoryConfig()

    def memory_writable(self, tier: str) -> bool:
        """Whether a wake of `tier` (this tier's name) binds the tools that write memory."""
        return self.memory.writable if self.memory.writable is not None else tier != Tier.whisper

    @field_validator("active_hours")
    @classmethod
    def _active_hours(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            try:
                hours.parse_window(text)
            except ValueError as exc:
                raise ValueError(f"{clip(text)}: {exc}") from None
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            from apscheduler.triggers.cron import CronTrigger  # the scheduler's parser, loaded by a config with a cron

            try:
                CronTrigger.from_crontab(value)
            except ValueError as exc:
                raise ValueError(f"expected a 5-field cron expression, got {clip(value)} ({clip(str(exc))})") from exc
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
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
        except ValueError as exc:
            raise ValueError(f"expected a str.format template such as '{{title}} due {{due_on}}', got {clip(value)} ({clip(str(exc))})") from exc
        if any(not f or f.isdigit() for f in fields):
            raise ValueError(f"expected named fields only ({{column}}), got {clip(value)}")
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
    """`[delivery.<name>]`: where a completed wake's final text is delivered (docs/daemon.md, "Delivery";
    the chat and mail channels, kind = "apprise": docs/channels.md)."""

    kind: Literal["webhook", "file", "stdout", "apprise"]
    # webhook: the URL the JSON is POSTed to; apprise: the Apprise URL (tgram://, mailto://, ...),
    # every secret part as a {credential} placeholder
    url: str | None = None
    # apprise: the credential holding the whole Apprise URL, instead of url
    url_credential: str | None = None
    # webhook: the credential whose value signs the body (X-Wake-Signature: sha256=<HMAC-SHA256>)
    secret_credential: str | None = None
    timeout_s: float = Field(10.0, gt=0)
    path: str | None = None  # file: JSON lines appended, relative to the config file
    max_attempts: int = Field(8, ge=1)  # then the delivery is `dead` (`wake outbox --failed`)
    backoff_s: float = Field(1.0, ge=0)  # the first wait between attempts; doubles each time
    backoff_max_s: float = Field(300.0, ge=0)
    # apprise: the message (str.format over text, agent, tier, wake_id, trigger, status,
    # settled_at, link) and its title; cut to max_chars, else to the channel's own limit
    template: str = channels.DEFAULT_TEMPLATE
    title: str = channels.DEFAULT_TITLE
    max_chars: int | None = Field(None, ge=100)

    @field_validator("template", "title")
    @classmethod
    def _template(cls, value: str) -> str:
        return channels.check_template(value)

    @model_validator(mode="after")
    def _target(self) -> DeliveryRoute:
        if self.kind == "webhook":
            try:
                check_http_url(self.url or "")
            except ValueError:
                raise ValueError(f"a webhook route needs url = an http:// or https:// URL with a host, got {clip(self.url)}") from None
        if self.kind == "file" and not self.path:
            raise ValueError("a file route needs path = a file to append JSON lines to")
        if self.kind == "apprise":
            channels.check_apprise_route(self.url, self.url_credential)
        elif self.url_credential is not None:
            raise ValueError(f"url_credential is for apprise routes; this one is kind = {self.kind!r}")
        return self


_RECALL = RecallSettings()


class RecallConfig(_Model):
    """The agent's `recall` tool (docs/recall.md). The defaults are the tool's own (`RecallSettings`)."""

    # A PostgreSQL text search configuration; 'simple' and 'english' are indexed (migration 0010).
    dictionary: str = _RECALL.dictionary
    continuing_candidates: int = Field(_RECALL.continuing_candidates, ge=1, le=500)
    continuing_cap: int = Field(_RECALL.continuing_cap, ge=1, le=50)
    ordinary_candidates: int = Field(_RECALL.ordinary_candidates, ge=1, le=500)
    ordinary_cap: int = Field(_RECALL.ordinary_cap, ge=1, le=50)
    recent_entries: int = Field(_RECALL.recent_entries, ge=0, le=100)

    @field_validator("dictionary")
    @classmethod
    def _dictionary(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?", value):
            raise ValueError(f"expected a text search configuration name such as 'simple' or 'english', got {clip(value)}")
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
                raise ValueError(f'expected relative prefixes such as "notes/" inside the repository, got {clip(prefix)}')
        return value

    @field_validator("severities")
    @classmethod
    def _domains(cls, value: dict[str, str]) -> dict[str, str]:
        known = [d.name for d in DEFAULT_DOMAINS]
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise KeyProblem((unknown[0],), f"unknown memory domain {clip(unknown[0])}; expected one of {', '.join(known)}")
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
            if len(value) > 255:  # no IANA name is this long; the lookup would read the disk for it
                raise ValueError(value)
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
            raise ValueError(f'expected an IANA timezone such as "Europe/Stockholm", got {clip(value)}') from exc
        return value

    @field_validator("quiet_hours")
    @classmethod
    def _quiet(cls, value: str | None) -> str | None:
        if value is not None and not _QUIET_HOURS.match(value):
            raise ValueError(f'expected "HH:MM-HH:MM" in 24-hour time, got {clip(value)}')
        return value

    @field_validator("workspace")
    @classmethod
    def _workspace(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\x00" in value):
            raise ValueError(f"expected the path of a git repository (relative to this file), got {clip(value)}")
        return value

    @field_validator("tiers")
    @classmethod
    def _tier_names(cls, value: dict[str, TierConfig]) -> dict[str, TierConfig]:
        unknown = sorted(set(value) - set(TIERS))
        if unknown:
            raise KeyProblem((unknown[0],), f"unknown tier {clip(unknown[0])}; expected one of {', '.join(TIERS)}")
        if not value:
            raise ValueError("expected at least one tier")
        return value


