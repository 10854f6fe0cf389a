"""Opens the three stores: PostgreSQL (asyncpg pool), Redis (redis.asyncio), Neo4j (optional).

Production and the embedded default share this code path; only where the DSN comes from
differs. A store that cannot be reached raises `StoreUnavailable` naming the store, its address
(password redacted) and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import asyncpg

from wake import logs, secrets
from wake.config import Config
from wake.errors import StoreUnavailable
from wake.stores import engines
from wake.stores.scope import ToolPool

if TYPE_CHECKING:  # imported when a graph is configured: a command without one never pays for the driver
    import neo4j
    import redis.asyncio as aioredis  # imported when Redis is opened: a command over the ledgers never pays for it

    from ledgers import graph

log = logs.get("wake.stores")

# asyncpg's own default: the prepared statements a direct connection keeps (none through a pooler).
STATEMENT_CACHE_SIZE = 100

# What asyncpg raises when PostgreSQL is away: it cannot connect (a unix socket that is gone
# raises FileNotFoundError), or a connection dropped under the caller, or the server is stopping.
PG_UNREACHABLE = (OSError, asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError, asyncpg.AdminShutdownError)
# What a caller of `pg_conn` meets when PostgreSQL fails under it or does not answer in time: the
# store is away, and what it was writing is to be tried again, never dropped. An error outside
# these (a constraint, a bug) is not an outage.
PG_OUTAGE: tuple[type[BaseException], ...] = (
    StoreUnavailable, TimeoutError, *PG_UNREACHABLE, asyncpg.InterfaceError, asyncpg.InternalClientError,
    asyncpg.exceptions.OperatorInterventionError,
)


def outage(st: Stores, exc: BaseException) -> StoreUnavailable | None:
    """`exc` as the outage it is, naming its store (`StoreUnavailable`: one line, exit 69); None
    when it is no outage (a constraint, a bug), which the caller lets through as it was."""
    import redis.exceptions

    if isinstance(exc, StoreUnavailable):
        return exc
    if isinstance(exc, redis.exceptions.RedisError):
        return StoreUnavailable("redis", st.redis_address or "(unknown)", _reason(exc))
    if isinstance(exc, PG_OUTAGE):
        return StoreUnavailable("postgres", st.pg_address, _reason(exc))
    return None


def _closed(conn: Any) -> bool:
    """True when a pooled connection's own connection is gone (the pool may have detached it)."""
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:  # released back to the pool under the body: it was closed
        return True


def neo4j_errors() -> tuple[type[BaseException], ...]:
    """What a Neo4j call raises when the server is unreachable, refuses, or times out."""
    import neo4j.exceptions

    return (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError, TimeoutError)


@dataclass
class Stores:
    config: Config
    pg: asyncpg.Pool
    # None when opened with `redis=False` (a command that reads the ledgers alone); `redis` says so.
    redis_client: aioredis.Redis | None
    neo4j: neo4j.AsyncDriver | None
    pg_address: str
    redis_address: str | None
    neo4j_address: str | None
    embedded: tuple[str, ...] = field(default_factory=tuple)
    # The agent graph over `neo4j` (its database and timeout), built once; None without Neo4j.
    graph: graph.Graph | None = None
    # The tool role's connections (`scoped_conn`), opened on first use (wake.stores.scope).
    tools: ToolPool | None = None

    @property
    def redis(self) -> aioredis.Redis:
        if self.redis_client is None:
            raise RuntimeError("these stores were opened without Redis")
        return self.redis_client

    @contextlib.asynccontextmanager
    async def pg_conn(self, *, trusted: bool = True) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection, waiting at most `postgres.acquire_timeout_s` for one.

        Released after a body that ended normally, the connection goes back with the light reset
        (`release_reset`); after an exception or a cancellation, or when `trusted` is False (an
        operator's own SQL), with the full one. docs/performance.md says why that is safe."""
        timeout_s = self.config.postgres.acquire_timeout_s
        try:
            conn_cm = self.pg.acquire(timeout=timeout_s)
            conn = await conn_cm.__aenter__()
        except TimeoutError as exc:
            raise StoreUnavailable("postgres", self.pg_address, f"no pooled connection within {timeout_s}s") from exc
        except PG_UNREACHABLE as exc:
            raise StoreUnavailable("postgres", self.pg_address, _reason(exc)) from exc
        clean = False
        try:
            yield cast(asyncpg.Connection, conn)  # the pool's proxy forwards every Connection method
            clean = trusted
        except (asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError, asyncpg.AdminShutdownError) as exc:
            raise StoreUnavailable("postgres", self.pg_address, _reason(exc)) from exc
        except asyncpg.InterfaceError as exc:
            if not _closed(conn):
                raise
            # the connection died under the body (PostgreSQL restarted or cut it): the store is away
            raise StoreUnavailable("postgres", self.pg_address, _reason(exc)) from exc
        finally:
            if clean:
                _CLEAN.add(cast(Any, conn)._con)  # the proxy's connection: what the pool's reset receives
            await conn_cm.__aexit__(None, None, None)

    def scoped_conn(self, agent_id: str) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection for tool code: it logs in as the tool role and sees only `agent_id`'s rows
        (row-level security, docs/isolation.md)."""
        if self.tools is None:
            raise RuntimeError("these stores were opened without a tool pool")
        return self.tools.conn(self, agent_id)

    async def close(self) -> None:
        if self.tools is not None:
            await self.tools.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.pg.close(), timeout=5)
        if self.redis_client is not None:
            with contextlib.suppress(Exception):
                await self.redis_client.aclose()
        if self.neo4j is not None:
            with contextlib.suppress(Exception):
                await self.neo4j.close()


# Connections whose last user ended normally through `Stores.pg_conn`; the pool's reset takes
# them out again. Weak, so a terminated connection leaves nothing behind.
_CLEAN: weakref.WeakSet[asyncpg.Connection] = weakref.WeakSet()


async def release_reset(conn: asyncpg.Connection) -> None:
    """The pool's reset on release. asyncpg has already rolled back an open transaction (it sees
    that without asking the server). A connection whose user ended normally through `pg_conn`
    holds nothing else: wake's code takes no session-level state (the migrations' advisory lock is a
    transaction's), and opens no cursor, LISTEN or SET outside a transaction. So
    it goes back as it is, with no round trip. Every other connection gets asyncpg's full reset
    (advisory locks, cursors, LISTEN, settings), one round trip."""
    if conn in _CLEAN:
        _CLEAN.discard(conn)
        return
    query = conn.get_reset_query()
    if query:
        await conn.execute(query)


def address(dsn_or_url: str) -> str:
    """A printable address: the DSN or URL with its password redacted."""
    return logs.redact_text(dsn_or_url)


async def resolve_postgres_dsn(config: Config) -> tuple[str, bool]:
    if config.postgres.dsn:
        return config.postgres.dsn, False
    dsn = await asyncio.to_thread(engines.start_postgres, config.state_dir_path(), idle_s=config.engines.idle_s)
    return dsn, True


async def resolve_redis_url(config: Config) -> tuple[str, bool]:
    """Where Redis is: the configured URL, the sentinels' address (`sentinel_address`) when it is
    reached through Sentinel, or the embedded server's URL (started here); and whether it is embedded."""
    if config.redis.sentinels:
        return sentinel_address(config), False
    if config.redis.url:
        return config.redis.url, False
    url = await asyncio.to_thread(engines.start_redis, config.state_dir_path(), idle_s=config.engines.idle_s)
    return url, True


def server_settings(config: Config, application_name: str) -> dict[str, str]:
    """The session settings of every pooled connection. `idle_in_transaction_session_timeout` is
    the lease TTL: a process frozen inside a transaction (SIGSTOP, a VM paused, a debugger) has lost
    its lease by then, and PostgreSQL ends its session, so the fence row it locked FOR SHARE is
    free for the next holder (a frozen holder cannot block an agent past the TTL).

    Through a pooler in transaction mode only `application_name` goes at login (PgBouncer refuses
    any other startup parameter, and a session setting would stay on a server connection other
    clients share): the pooler's own `idle_transaction_timeout` does the timeout's work there
    (docs/configuration.md, "Through a connection pooler")."""
    if config.postgres.pooler == "transaction":
        return {"application_name": application_name}
    return {
        "application_name": application_name,
        "idle_in_transaction_session_timeout": str(max(1, round(config.daemon.lease_ttl_s * 1000))),
    }


def connect_options(config: Config, application_name: str) -> dict[str, Any]:
    """What every pool of wake's passes to asyncpg besides its DSN and sizes. Through a pooler in
    transaction mode asyncpg's statement cache is off (`statement_cache_size=0`): a named prepared
    statement lives on one server connection, and the next transaction may run on another. asyncpg
    then sends each query as an unnamed statement, parsed and executed before the server goes back
    to the pooler (Parse/Describe end with a Flush, not a Sync)."""
    return {
        "command_timeout": config.postgres.command_timeout_s,
        "timeout": config.postgres.connect_timeout_s,
        "server_settings": server_settings(config, application_name),
        "statement_cache_size": 0 if config.postgres.pooler == "transaction" else STATEMENT_CACHE_SIZE,
        "reset": release_reset,
    }


async def open_postgres(config: Config, dsn: str) -> asyncpg.Pool:
    conf = config.postgres
    where = address(dsn) if dsn != "postgresql://" else config.environment.libpq_address
    try:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min(conf.pool_min_size, conf.pool_max_size),
            max_size=conf.pool_max_size,
            **connect_options(config, "wake"),
        )
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        raise StoreUnavailable("postgres", where, _reason(exc) + _pooler_hint(config, exc)) from exc
    assert pool is not None
    return pool


def sentinel_address(config: Config) -> str:
    """A printable address of Redis through Sentinel: `sentinel://HOST:PORT,.../<master name>`."""
    return f"sentinel://{','.join(config.redis.sentinels)}/{config.redis.master_name}"


def _pooler_hint(config: Config, exc: BaseException) -> str:
    """What to do when a pooler refused the session settings wake sends to a direct server."""
    if config.postgres.pooler == "none" and "unsupported startup parameter" in str(exc):
        return '; a connection pooler in transaction mode answers at this address: set postgres.pooler = "transaction"'
    return ""


async def open_redis(config: Config, url: str) -> aioredis.Redis:
    """A client of the configured Redis at `url` (from `resolve_redis_url`): through Sentinel when
    `redis.sentinels` is set, a client of the primary that the sentinels name and name again
    after a failover (redis-py's `Sentinel.master_for`), else a client of the URL."""
    import redis.asyncio as aioredis
    import redis.exceptions

    timeout_s = config.redis.socket_timeout_s
    client = (
        _sentinel_master(config) if config.redis.sentinels
        else aioredis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True)
    )
    try:
        await client.ping()
    except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
        await client.aclose()
        raise StoreUnavailable("redis", address(url), _reason(exc)) from exc
    return client


def _sentinel_master(config: Config) -> aioredis.Redis:
    import redis.asyncio as aioredis
    from redis.asyncio.sentinel import Sentinel

    class SentinelMaster(aioredis.Redis):
        """The primary's client; closing it closes the sentinels' clients too (redis-py leaves them open)."""

        async def aclose(self, close_connection_pool: bool | None = None) -> None:
            try:
                await super().aclose(close_connection_pool)
            finally:
                await sentinel.aclose()

    assert config.redis.master_name is not None  # the config's check: sentinels come with it
    timeout_s = config.redis.socket_timeout_s
    password, sentinel_password = (_redis_credential(config, name) for name in
                                   (config.redis.password_credential, config.redis.sentinel_password_credential))
    sentinel = Sentinel(
        config.redis.sentinel_addresses(), socket_timeout=timeout_s, socket_connect_timeout=timeout_s, password=password,
        sentinel_kwargs={"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s, "password": sentinel_password},
    )
    master: aioredis.Redis = sentinel.master_for(config.redis.master_name, redis_class=SentinelMaster, decode_responses=True)
    return master


def _redis_credential(config: Config, name: str | None) -> str | None:
    """A password `[redis]` names, read now; a name with nothing behind it is Redis unavailable, said plainly."""
    if name is None:
        return None
    secret = secrets.read_secret(name)
    if secret is None:
        raise StoreUnavailable("redis", sentinel_address(config),
                               f"credential {name} is not set (a file in $CREDENTIALS_DIRECTORY, or ${secrets.env_name(name)})")
    return secret.reveal()


def neo4j_auth(config: Config) -> tuple[str, str] | None:
    """`NEO4J_AUTH` as the loader read it ("none": no auth), else the configured credential."""
    auth = config.environment.neo4j_auth
    if auth == "none":
        return None
    if auth is not None:
        user, password = auth
        return user, password.reveal()
    if config.neo4j.password_credential:
        secret = secrets.read_secret(config.neo4j.password_credential)
        if secret is not None:
            return config.neo4j.user, secret.reveal()
    return None


async def open_neo4j(config: Config) -> neo4j.AsyncDriver:
    import neo4j

    uri = config.neo4j.uri
    assert uri
    driver = neo4j.AsyncGraphDatabase.driver(
        uri, auth=neo4j_auth(config), connection_timeout=config.neo4j.timeout_s,
        # retry a failed transaction briefly only: the block and tools should report an outage
        # (ServiceUnavailable) within their own timeout, not wait it out
        max_transaction_retry_time=min(1.0, config.neo4j.timeout_s / 4),
        # "relationship type does not exist" is normal in a young graph, not worth a warning
        notifications_disabled_classifications=[neo4j.NotificationDisabledClassification.UNRECOGNIZED],
    )
    try:
        await asyncio.wait_for(driver.verify_connectivity(), timeout=config.neo4j.timeout_s)
    except neo4j_errors() as exc:
        await driver.close()
        raise StoreUnavailable("neo4j", address(uri), _reason(exc)) from exc
    return driver


async def open_stores(config: Config, *, neo4j: bool = True, redis: bool = True) -> Stores:
    """Open every configured store; embedded engines start when no DSN is configured. With
    `redis=False` Redis is neither started nor imported (a command that reads the ledgers alone)."""
    dsn, pg_embedded = await resolve_postgres_dsn(config)
    url, redis_embedded = await resolve_redis_url(config) if redis else (None, False)
    pool = await open_postgres(config, dsn)
    client = None
    driver = None
    try:
        if url is not None:
            client = await open_redis(config, url)
        if neo4j and config.neo4j.uri:
            driver = await open_neo4j(config)
    except BaseException:
        await pool.close()
        if client is not None:
            await client.aclose()
        raise
    embedded = tuple(name for name, flag in (("postgres", pg_embedded), ("redis", redis_embedded)) if flag)
    return Stores(
        config=config,
        pg=pool,
        redis_client=client,
        neo4j=driver,
        pg_address=address(dsn),
        redis_address=address(url) if url is not None else None,
        neo4j_address=address(config.neo4j.uri) if config.neo4j.uri else None,
        embedded=embedded,
        tools=ToolPool(dsn),
        graph=_graph(config, driver),
    )


def _graph(config: Config, driver: neo4j.AsyncDriver | None) -> graph.Graph | None:
    """The graph ledger over the driver, when a graph is configured (its module loaded with it)."""
    if driver is None or not config.neo4j.uri:
        return None
    from ledgers import graph

    return graph.on(driver, database=config.neo4j.database, timeout_s=config.neo4j.timeout_s, address=address(config.neo4j.uri))


@contextlib.asynccontextmanager
async def connected(config: Config, *, neo4j: bool = True, redis: bool = True) -> AsyncIterator[Stores]:
    stores = await open_stores(config, neo4j=neo4j, redis=redis)
    try:
        yield stores
    finally:
        await stores.close()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, TimeoutError):
        text = "timed out"
    return logs.redact_text(f"{type(exc).__name__}: {text}" if not text.startswith(type(exc).__name__) else text)
