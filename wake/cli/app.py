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
from wake.cli.commands import LazyGroup
from wake.errors import InvalidInput, NotFound, SchemaError, WakeError

if TYPE_CHECKING:
    import asyncpg

    from wake import stores
    from wake.config import Config

# What this module imports is what `wake --version` and `wake --help` import: click and the names
# above. The config, the logs and the stores are imported where a command first needs them.

T = TypeVar("T")


def fail(exc: WakeError) -> NoReturn:
    click.echo(f"wake: {exc}", err=True)
    sys.exit(exc.exit_code)


def run_async(coro_fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body; expected errors become one line and their exit status."""
    import asyncio

    try:
        return asyncio.run(_translate(coro_fn))
    except WakeError as exc:
        fail(exc)
        raise  # unreachable


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
    def __init__(self, config_path: str | None) -> None:
        self.config_path = config_path
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
            logs.configure(self._config.log.format, self._config.log.level, stream=sys.stderr)
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
@click.version_option(__version__, prog_name="wake")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Wake long-lived LLM agents on a schedule, with a witness record of every wake.

    Logs of one-shot commands go to stderr (JSON when stderr is not a terminal; force with
    WAKE_LOG_FORMAT=json|console); command output goes to stdout.
    """
    from wake import logs
    from wake.config import loader as config_loader

    log_format, log_level = config_loader.log_settings()
    logs.configure(log_format, log_level, stream=sys.stderr)
    refuse_undecodable(sys.argv[1:])
    ctx.obj = Context(config_path)


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

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            from wake.config import check_agent_id

            return check_agent_id(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


AGENT_ID = AgentIdType()


TIER_CHOICE = click.Choice([t.value for t in Tier])


def agent_option(required: bool = False) -> Callable[[Any], Any]:
    return click.option("--agent", "agent_id", type=AGENT_ID, required=required, help="Agent id ([agents.<id>] in the config).")


CLIP_CHARS = 80  # an echoed value longer than this is cut, and its length said


def clip(value: str, limit: int = CLIP_CHARS) -> str:
    """`value` quoted for a message, cut at `limit` characters with its length said."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def default_agent(config: Config, agent_id: str | None) -> str:
    """The agent a command acts on; an unknown agent, or none named among several, is refused
    input (exit 65), as for every command (README, "Exit statuses")."""
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


