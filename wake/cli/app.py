"""The `wake` command group and what every command shares: the config, one way to run an async
body (expected failures become one line and their exit status, no traceback), one way to reach
the ledgers (stores opened, schema prepared), and the agent/tier options.

Exit statuses follow sysexits: 78 bad config, 69 a store unreachable, 65 schema mismatch,
70 a malformed tool declaration, 75 busy or timed out, 1 anything else expected, 2 usage.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from ledgers.vocab import Tier
from wake import __version__
from wake.cli.commands import SERVERS, TRACED, LazyGroup
from wake.errors import ConfigError, InvalidInput, NotFound, SchemaError, WakeError

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

    import asyncpg

    from wake import stores
    from wake.config import Config

# What this module imports is what `wake --version` and `wake --help` import: click and the names
# above. The config, the logs and the stores are imported where a command first needs them.

T = TypeVar("T")


def fail(exc: WakeError) -> NoReturn:
    click.echo(f"wake: {exc}", err=True)
    sys.exit(exc.exit_code)


def run_async(coro_fn: Callable[[], Awaitable[T]], *, event_loop: str = "asyncio", source: str = "the config") -> T:
    """Run an async command body; expected errors become one line and their exit status.
    `event_loop`: "asyncio" or "uvloop" (`daemon.event_loop`: the daemon's, from the file `source`)."""
    import asyncio

    try:
        with asyncio.Runner(loop_factory=loop_factory(event_loop, source)) as runner:
            return runner.run(_translate(coro_fn))
    except WakeError as exc:
        fail(exc)
        raise  # unreachable


def loop_factory(event_loop: str, source: str = "the config") -> Callable[[], AbstractEventLoop] | None:
    """The factory of `event_loop`'s loops for `asyncio.Runner` (None: asyncio's own)."""
    if event_loop == "uvloop":
        try:
            import uvloop
        except ImportError as exc:  # a dependency missing from this install: say which key chose it
            raise ConfigError(source, "daemon.event_loop", f'"uvloop", but uvloop cannot be imported ({exc}); '
                              'install it, or set "asyncio"') from exc
        return uvloop.new_event_loop
    return None


async def _translate(coro_fn: Callable[[], Awaitable[T]]) -> T:
    from ledgers import errors

    try:
        return await coro_fn()
    except errors.SchemaMismatch as exc:
        raise SchemaError(str(exc)) from exc
    except errors.IdLookupError as exc:  # a prefix too short, not hex, or shared by several rows
        raise NotFound(str(exc)) from exc
    except errors.MessageRefused as exc:
        raise InvalidInput(str(exc)) from exc


class Context:
    def __init__(self, config_path: str | None, *, quiet: bool = False) -> None:
        self.config_path = config_path
        self.quiet = quiet  # a one-shot command on a terminal without -v: its logs at warning (`terminal_level`)
        self._config: Config | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            from wake import logs
            from wake.config import load_config

            try:
                self._config = load_config(self.config_path)
            except WakeError as exc:
                fail(exc)
            assert self._config is not None
            level = logs.quieter(self._config.log.level) if self.quiet else self._config.log.level
            logs.configure(self._config.log.format, level, stream=sys.stderr)
        return self._config


pass_ctx = click.make_pass_decorator(Context)


@contextlib.asynccontextmanager
async def ledger_stores(config: Config, *, redis: bool = True) -> AsyncIterator[stores.Stores]:
    """The stores for a command over the ledgers (no graph), with the schema prepared the same way
    for every command: pending migrations applied when `postgres.auto_migrate` is on, then the
    exact head required (exit 65 otherwise). With `redis=False` (a command that reads PostgreSQL
    alone) Redis is neither started nor imported."""
    from wake import stores
    from wake.stores import prepared

    async with stores.connected(config, neo4j=False, redis=redis) as st:
        await prepared.prepare_schema(st)
        yield st


@contextlib.asynccontextmanager
async def ledger_conn(config: Config) -> AsyncIterator[asyncpg.Connection]:
    """A PostgreSQL connection from `ledger_stores`, without Redis."""
    async with ledger_stores(config, redis=False) as st, st.pg_conn() as conn:
        yield conn


async def resolve_wake(conn: asyncpg.Connection, text: str) -> uuid.UUID:
    """A wake id from a full id or a unique prefix."""
    from ledgers import introspection

    wake_id = await introspection.resolve_id(conn, text)
    if wake_id is None:
        raise NotFound(f"no wake matches {text!r} (give a full id or a unique prefix)")
    return wake_id



@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Config file. Else $WAKE_CONFIG, ./wake.toml, ~/.config/wake/wake.toml, /etc/wake/wake.toml, "
    "then the embedded default. Overrides: WAKE_<SECTION>__<KEY>, DATABASE_URL, PG*, REDIS_URL, NEO4J_URI.",
)
@click.option("-v", "--verbose", is_flag=True, help="On a terminal, show a one-shot command's info logs too (they are shown at warning and above).")
@click.version_option(__version__, prog_name="wake")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, verbose: bool) -> None:
    """Wake long-lived LLM agents on a schedule, with a witness record of every wake.

    Logs of one-shot commands go to stderr: on a terminal, warnings and errors only (-v for all,
    at the configured level); elsewhere JSON at the configured level (force the format with
    WAKE_LOG_FORMAT=json|console). Command output goes to stdout. The servers (daemon, console,
    mcp) log at the configured level.
    """
    from wake import logs
    from wake.config import loader

    log_format, log_level = loader.log_settings()
    quiet = not verbose and sys.stderr.isatty() and ctx.invoked_subcommand not in SERVERS
    logs.configure(log_format, logs.quieter(log_level) if quiet else log_level, stream=sys.stderr)
    if ctx.invoked_subcommand in TRACED:
        from wake.observe import tracing

        tracing.configure()  # off unless the OTEL_* variables ask for it (docs/traces.md)
    refuse_undecodable(sys.argv[1:])
    ctx.obj = Context(config_path, quiet=quiet)


def refuse_undecodable(args: list[str]) -> None:
    """An argument that is not valid UTF-8 (Python keeps its bytes as lone surrogates) is refused
    input, exit 65, before anything runs: no store can hold it as text."""
    for n, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            fail(InvalidInput(f"argument {n} is not valid UTF-8 (at character {exc.start} of {len(arg)})"))



if TYPE_CHECKING:  # generic from click 8.2 on; pyproject allows 8.1
    _StrParam = click.ParamType[str, Any]
else:
    _StrParam = click.ParamType


class AgentIdType(_StrParam):
    """An agent id on the command line: the config's pattern (`wake.config.AGENT_ID_PATTERN`), checked
    before anything is looked up, so a malformed id is one clipped line (usage, exit 2)."""

    name = "AGENT"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            from wake.config import check_agent_id

            return check_agent_id(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


AGENT_ID = AgentIdType()

# A row id on the command line is a PostgreSQL bigint: one past it is a usage error (exit 2) before
# any query, never the driver's DataError. Every integer option has an upper bound (the option walk
# in tests/acceptance/test_cli_option_walk.py holds every command to it).
MAX_BIGINT = 2**63 - 1
ROW_ID = click.IntRange(1, MAX_BIGINT)
DAYS = click.IntRange(0, 3650)  # ten years, as every duration in the config


class SecondsType(click.FloatRange):
    """Seconds on the command line: finite, from `min_s` to ten years (`wake.config.MAX_DURATION_S`)."""

    def __init__(self, min_s: float) -> None:
        from wake.config import MAX_DURATION_S

        super().__init__(min=min_s, max=MAX_DURATION_S)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"expected a finite number of seconds, got {clip(str(value))}", param, ctx)
        return number


class ShareType(click.FloatRange):
    """A share from 0 to 1 on the command line, finite (a NaN passes FloatRange's bounds)."""

    def __init__(self) -> None:
        super().__init__(min=0.0, max=1.0)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"expected a share from 0 to 1, got {clip(str(value))}", param, ctx)
        return number


class WhoType(_StrParam):
    """Who did it (`--by`): one line of 1 to 100 characters, recorded with the action."""

    name = "NAME"
    max_chars = 100

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from wake.config import unstorable

        text = str(value).strip()
        if not text:
            self.fail("say who you are: an empty name is not recorded", param, ctx)
        if len(text) > self.max_chars:
            self.fail(f"expected at most {self.max_chars} characters, got {len(text)}", param, ctx)
        if (why := unstorable(text, single_line=True)) is not None:
            self.fail(f"the name {why}", param, ctx)
        return text


WHO = WhoType()


TIER_CHOICE = click.Choice([t.value for t in Tier])


def agent_option(required: bool = False) -> Callable[[object], Any]:
    return click.option("--agent", "agent_id", type=AGENT_ID, required=required, help="Agent id ([agents.<id>] in the config).")


CLIP_CHARS = 80  # an echoed value longer than this is cut, and its length said


def clip(value: str, limit: int = CLIP_CHARS) -> str:
    """`value` quoted for a message, cut at `limit` characters with its length said."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def default_agent(config: Config, agent_id: str | None) -> str:
    """The agent a command acts on; an unknown agent, or none named among several, is refused
    input (exit 65), as for every command (docs/commands.md, "Exit statuses")."""
    if agent_id is not None:
        if agent_id not in config.agents:
            fail(InvalidInput(f"no agent {clip(agent_id)} is configured; known: {', '.join(sorted(config.agents))}"))
        return agent_id
    if len(config.agents) == 1:
        return next(iter(config.agents))
    fail(InvalidInput(f"several agents are configured; name one with --agent ({', '.join(config.agents)})"))


def agent_with_tier(config: Config, agent_id: str | None, tier: str) -> str:
    agent = default_agent(config, agent_id)
    if tier not in config.agents[agent].tiers:
        fail(InvalidInput(f"agent {agent!r} has no {tier} tier; configured: {', '.join(config.agents[agent].tiers)}"))
    return agent


