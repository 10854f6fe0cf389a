"""Redis through Sentinel for the tests and the chaos run: a primary, a replica and three sentinels
from Debian's `redis-server` and `redis-sentinel` packages, on free loopback ports, in a directory
of the caller's (a test's tmp_path). Nothing here is a service: each server is a child process that
dies with its parent, and every wait is a bounded poll of what the servers themselves say.

    cluster = SentinelCluster.start(tmp_path)
    cluster.failover()      # SENTINEL FAILOVER: the replica becomes the primary
    cluster.kill_primary()  # SIGKILL the primary; the sentinels promote the replica; the old one
                            # comes back (empty, as without persistence) as the new primary's replica
    cluster.stop()

`WAKE_REQUIRE_SENTINEL=1` (CI) turns a missing binary into a failure instead of a skip (`available`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
import redis

from tests.support.processes import die_with_parent, free_port

MASTER_NAME = "wakeprimary"
QUORUM = 2
# How long a primary may stay silent before a sentinel calls it down (and a failover starts).
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
INFO_PERIOD_MS = 1000  # `_quick_info`
# The bound on every wait here: a start, an agreement between the sentinels, a failover.
WAIT_S = 60.0
_POLL_S = 0.05
T = TypeVar("T")


def binaries() -> tuple[str, str] | None:
    """Debian's redis-server and redis-sentinel, or None when either is missing."""
    server, sentinel = shutil.which("redis-server"), shutil.which("redis-sentinel")
    return (server, sentinel) if server and sentinel else None


def available() -> str | None:
    """None when the cluster can start here; else why not (a skip reason), or AssertionError under
    WAKE_REQUIRE_SENTINEL=1."""
    if binaries() is not None:
        return None
    why = "Redis Sentinel tests need Debian's redis-server and redis-sentinel (apt-get install redis-server redis-sentinel)"
    if os.environ.get("WAKE_REQUIRE_SENTINEL") == "1":
        raise AssertionError(why)
    return why


def poll(what: str, probe: Callable[[], T | None], timeout_s: float = WAIT_S) -> T:
    """`probe()`'s first value that is not None (a Redis error counts as None), within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while True:
        try:
            value = probe()
        except (redis.RedisError, OSError) as exc:
            value, last = None, exc
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"sentinel cluster: {what} not within {timeout_s:g}s" + (f" (last error: {last!r})" if last else ""))
        time.sleep(_POLL_S)


@dataclass
class Server:
    """One redis-server (the primary or the replica) on its own port and directory."""

    port: int
    dir: Path
    exe: str
    password: str | None = None  # its requirepass, and the masterauth it replicates with
    proc: subprocess.Popen[bytes] | None = None

    def start(self, replica_of: int | None = None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        args = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--protected-mode", "no", "--logfile", str(self.dir / "redis.log")]
        if replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        if self.password is not None:
            args += ["--requirepass", self.password, "--masterauth", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
        poll(f"redis-server on port {self.port}", lambda: self.client().ping() or None)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, socket_connect_timeout=2, decode_responses=True,
                           password=self.password)

    def role(self) -> str:
        with self.client() as c:
            return str(c.execute_command("ROLE")[0])

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class SentinelCluster:
    root: Path
    servers: list[Server]
    sentinel_ports: list[int]
    sentinel_procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    failovers: int = 0  # completed, as seen by `failover` and `kill_primary`
    sentinel_password: str | None = None  # the sentinels' own requirepass

    @classmethod
    def start(cls, root: Path, *, password: str | None = None, sentinel_password: str | None = None) -> SentinelCluster:
        """A primary, its replica and three sentinels, started and agreed (every sentinel sees the
        replica and the two other sentinels); `password` the servers' requirepass (the sentinels
        are told it), `sentinel_password` the sentinels' own (they use it with each other too)."""
        found = binaries()
        if found is None:
            raise RuntimeError(available() or "no redis-server")
        server_exe, sentinel_exe = found
        root.mkdir(parents=True, exist_ok=True)
        ports = _distinct_free_ports(5)  # two servers, three sentinels: none bound yet, so free_port alone may repeat one
        servers = [Server(ports[i], root / f"redis-{i}", server_exe, password) for i in range(2)]
        cluster = cls(root, servers, ports[2:], sentinel_password=sentinel_password)
        auth = (f"sentinel auth-pass {MASTER_NAME} {password}\n" if password else "") + (
            f"requirepass {sentinel_password}\nsentinel sentinel-pass {sentinel_password}\n" if sentinel_password else "")
        try:
            servers[0].start()
            servers[1].start(replica_of=servers[0].port)
            poll("the replica in sync", lambda: cluster._synced(servers[1], servers[0].port) or None)
            for i, port in enumerate(cluster.sentinel_ports):
                conf = root / f"sentinel-{i}.conf"  # the sentinel rewrites it: one of its own
                conf.write_text(
                    f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir {root}\nlogfile {root / f'sentinel-{i}.log'}\n"
                    f"sentinel monitor {MASTER_NAME} 127.0.0.1 {servers[0].port} {QUORUM}\n"
                    f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
                    f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
                    f"sentinel parallel-syncs {MASTER_NAME} 1\n{auth}"
                )
                cluster.sentinel_procs.append(subprocess.Popen([sentinel_exe, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                               preexec_fn=die_with_parent))
            for i in range(len(cluster.sentinel_ports)):
                poll(f"sentinel {i} taking its info period", functools.partial(cluster._quick_info, i))
            cluster.wait_agreed(servers[0].port)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _quick_info(self, index: int) -> bool | None:
        """The sentinel at `index` reads its servers' INFO every `INFO_PERIOD_MS`, not every 10 s
        (Redis 7's `SENTINEL DEBUG`). After a failover a sentinel learns of the demoted primary and
        its link to the new one only from INFO: two of its reads, about 20 s at Redis's period.
        The failovers themselves are Sentinel's as in production; only that wait is shorter."""
        with self.sentinel(index) as s:
            return True if s.execute_command("SENTINEL", "DEBUG", "INFO-PERIOD", INFO_PERIOD_MS) else None

    @property
    def addresses(self) -> list[str]:
        """The sentinels as `redis.sentinels` takes them."""
        return [f"127.0.0.1:{p}" for p in self.sentinel_ports]

    def toml(self) -> str:
        """A `[redis]` table that reaches this cluster through its sentinels."""
        listed = ", ".join(f'"{a}"' for a in self.addresses)
        return f'[redis]\nsentinels = [{listed}]\nmaster_name = "{MASTER_NAME}"\n'

    def sentinel(self, index: int = 0) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.sentinel_ports[index], socket_timeout=2, socket_connect_timeout=2,
                           decode_responses=True, password=self.sentinel_password)

    def primary_port(self) -> int:
        """The primary's port as the first sentinel names it."""
        with self.sentinel() as s:
            _, port = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
        return int(port)

    def primary(self) -> Server:
        port = self.primary_port()
        return next(s for s in self.servers if s.port == port)

    def replica(self) -> Server:
        port = self.primary_port()
        return next(s for s in self.servers if s.port != port)

    def primary_client(self) -> redis.Redis:
        return self.primary().client()

    def failover(self) -> int:
        """SENTINEL FAILOVER: the replica becomes the primary, the old primary its replica. Returns
        the new primary's port once every sentinel names it and it is in sync with its replica."""
        old = self.primary_port()
        with self.sentinel() as s:
            # refused while a previous failover's promotion is still settling: asked again until taken
            poll("SENTINEL FAILOVER accepted", lambda: _accepted(s))
        return self._after_failover(old)

    def kill_primary(self) -> int:
        """SIGKILL the primary; the sentinels see it down and promote the replica. The old primary is
        started again, empty (no persistence), and the sentinels make it the new primary's replica.
        Returns the new primary's port."""
        old = self.primary()
        old.kill()
        new_port = poll("a new primary after the kill", lambda: self._agreed_new_primary(old.port))
        old.start(replica_of=new_port)  # as the sentinels would reconfigure it; they then keep it so
        return self._after_failover(old.port)

    def _after_failover(self, old_port: int) -> int:
        # After SENTINEL FAILOVER the old primary is demoted only when the sentinels next read its
        # INFO (every 10 s), and they see the link up only at the read after: about 20 s here.
        poll("every sentinel naming a new primary", lambda: self._agreed_new_primary(old_port))
        # A loaded machine can make the new primary miss its down-after while it is promoted, and the
        # sentinels then fail over again, back to the old one (seen in a chaos run: the primary
        # killed, its replica promoted, then the restarted and still empty old primary promoted in
        # turn). Whatever the cluster settles on is the primary: waited for whole, not assumed.
        new_port = poll("the cluster settling on a primary", self._settled)
        self.failovers += 1
        return new_port

    def _agreed_new_primary(self, old_port: int) -> int | None:
        ports = set()
        for i in range(len(self.sentinel_ports)):
            with self.sentinel(i) as s:
                ports.add(int(s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)[1]))
        if len(ports) == 1 and old_port not in ports:
            return ports.pop()
        return None

    def wait_agreed(self, primary_port: int) -> None:
        """Every sentinel names `primary_port`, which takes writes, sees one replica of it in sync
        (not down) and two other sentinels."""
        poll(f"the cluster settling on :{primary_port}", lambda: True if self._settled() == primary_port else None)

    def _settled(self) -> int | None:
        """The primary's port once every sentinel names the same one, it takes writes, the other
        server is its replica in sync, and every sentinel sees that replica up and two other
        sentinels; else None."""
        named = set()
        for i in range(len(self.sentinel_ports)):
            with self.sentinel(i) as s:
                named.add(int(s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)[1]))
        if len(named) != 1:
            return None
        port = named.pop()
        primary = next((s for s in self.servers if s.port == port), None)
        replica = next((s for s in self.servers if s.port != port), None)
        if primary is None or replica is None or primary.role() != "master" or not self._synced(replica, port):
            return None
        for i in range(len(self.sentinel_ports)):
            with self.sentinel(i) as s:
                replicas = s.execute_command("SENTINEL", "REPLICAS", MASTER_NAME)
                up = [r for r in map(_pairs, replicas) if int(r["port"]) == replica.port and "down" not in r["flags"]
                      and r.get("master-link-status") == "ok"]
                if not up or len(s.execute_command("SENTINEL", "SENTINELS", MASTER_NAME)) != len(self.sentinel_ports) - 1:
                    return None
        return port

    @staticmethod
    def _synced(replica: Server, primary_port: int) -> bool:
        with replica.client() as c:
            info = c.info("replication")
        return info.get("role") == "slave" and int(info.get("master_port") or 0) == primary_port \
            and info.get("master_link_status") == "up" and not info.get("master_sync_in_progress")

    def stop(self) -> None:
        for proc in self.sentinel_procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.sentinel_procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)
            if proc.poll() is None:
                proc.kill()
        for server in self.servers:
            server.stop()


def _distinct_free_ports(n: int) -> list[int]:
    """`n` ports free now and different from each other (a port free_port gave and nobody bound yet
    is free again: a sentinel once got the replica's port, and the cluster never agreed)."""
    ports: list[int] = []
    while len(ports) < n:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


def _accepted(s: redis.Redis) -> bool | None:
    try:
        s.execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
    except redis.ResponseError as exc:  # INPROG, NOGOODSLAVE: not yet
        if "INPROG" in str(exc) or "NOGOODSLAVE" in str(exc):
            return None
        raise
    return True


def _pairs(flat: list[str] | dict[str, str]) -> dict[str, str]:
    """A sentinel's reply about an instance as a dict (a flat key, value list under RESP2)."""
    if isinstance(flat, dict):
        return flat
    return dict(zip(flat[::2], flat[1::2], strict=True))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    """A primary, a replica and three sentinels in the test's directory (skipped, saying why, without the binaries)."""
    if (why := available()) is not None:
        pytest.skip(why)
    started = SentinelCluster.start(tmp_path / "sentinel")
    try:
        yield started
    finally:
        started.stop()
