"""Scale bench: R daemon replicas (real processes) × A agents on one PostgreSQL and one Redis, memory
off, no model, once with each agent scheduled by its owner alone (`ownership = "rendezvous"`) and
once the old way (`every_replica`: every replica schedules every agent and races for each claim),
in the same run on the same stores. Prints figures; it is not a timed test.

    python bench/replicas.py [--replicas 4] [--agents 20000] [--every 180] [--jitter-share 0.9]
                             [--settle-s 15] [--heartbeat-s 10] [--modes rendezvous,every_replica] [--dir DIR]
                             [--event-loop uvloop|asyncio]

Every agent has one whisper every `--every` seconds, its slots aligned to the epoch, its fires
spread over the first `--jitter-share` of the interval (`jitter_s`). The measured slot is the first
slot boundary B at least `--settle-s` after every replica is ready: all A agents are due at B, and
their fires fall in [B, B + jitter), so the window is exactly one slot and nothing else fires in
it (the slot before has finished its fires by B - (every - jitter)). At the default 20,000 agents
every 180 s that is 111 fires a second, the rate of 100,000 agents on a 15-minute whisper, on
one box (at 120 s, 167 a second, this 2-core machine's replicas fell behind while a test suite
ran beside them, and their metrics stopped answering: printed as None). Per mode:

- start: from each replica's spawn to its `daemon.ready`, and to its first row (its first fire);
- fire lag: from B plus the agent's jitter delay to its wake's row starting, p50/p99;
- claim attempts per slot: every replica's `wake_slot_claims_total` (won + taken), read from all
  replicas at once before the slot and after its window (asked again until they answer: a
  replica behind the rate answers late), against the slots claimed between the two reads;
- fired of due: agents with a row for slot B against A (and rows beyond one per agent, which
  would be a double fire), counted once every agent has one or none came in `--settle-s` (at most
  another interval after the window: replicas behind the rate are still working the slot off),
  with when that was;
- resident memory per replica (VmRSS), at ready and at the end of the window;
- rendezvous only: the takeover after kill -9 of one replica (from the kill to the survivors'
  `wake.handover` with `why=expired`; the stated bound is 3 heartbeats plus one), then a SIGTERM
  hand-over of a survivor that took agents over: from the signal to the others' `wake.handover`
  with `why=stopped`, and to its exit;
- every_replica: the SIGTERM of one replica, to its exit.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import datetime as dt
import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.chaos import Postgres, Redis, Replicas, free_port  # noqa: E402
from ledgers import schema  # noqa: E402
from wake.daemon import schedule  # noqa: E402

START_BOUND_S = 600.0  # a replica not ready by then is reported, not waited for


def config_text(dsn: str, redis_url: str, agents: int, every_s: int, jitter_s: int, mode: str, listen: int, beat_s: float,
                event_loop: str | None = None) -> str:
    loop = f'event_loop = "{event_loop}"\n' if event_loop else ""
    lines = [
        f'[postgres]\ndsn = "{dsn}"\npool_max_size = 16\n[redis]\nurl = "{redis_url}"\n[metrics]\nlisten = "127.0.0.1:{listen}"\n',
        f'[daemon]\nheartbeat_s = {beat_s:g}\nlease_ttl_s = 10\nbusy_wait_s = 0\ndrain_s = 30\nownership = "{mode}"\n{loop}',
    ]
    for i in range(agents):
        a = f"agents.s{i:06d}"
        lines.append(f'[{a}]\ntimezone = "UTC"\n[{a}.memory]\nenabled = false\n'
                     f'[{a}.tiers.whisper]\nevery = "{every_s}s"\njitter_s = {jitter_s}\nbinds = ["wake.whisper"]\n')
    return "\n".join(lines)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def rss_mib(pid: int) -> float:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024


def claims(port: int, deadline: float) -> float | None:
    """A replica's claim attempts so far, asked again until `deadline` (a loop saturated by a backlog
    answers late), or None if it never answered."""
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=max(1.0, min(30.0, deadline - time.time()))) as resp:
                text = resp.read().decode()
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("wake_slot_claims_total{"))
        except OSError:
            if time.time() >= deadline:
                return None
            time.sleep(1)


def read_claims(ports: list[int], within_s: float) -> tuple[float | None, float, float]:
    """Every replica's claim attempts, asked at once (so the reads are as near one instant as the
    loops allow): their sum (None if one never answered) and when the reads began and ended."""
    began = time.time()
    with concurrent.futures.ThreadPoolExecutor(len(ports)) as pool:
        values = list(pool.map(lambda p: claims(p, began + within_s), ports))
    return total(values), began, time.time()


def total(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def events(log: Path, name: str) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            e = json.loads(line)
            if e.get("event") == name:
                found.append(e)
    return found


def first_event(log: Path, name: str, timeout_s: float) -> dict[str, Any] | None:
    found: list[dict[str, Any]] | None = poll(lambda: events(log, name), timeout_s, 1.0)
    return found[0] if found else None


def at(event: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def poll(what: Callable[[], Any], timeout_s: float, every_s: float = 0.2) -> Any:
    """`what()` once it is truthy, or None after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(every_s)
    return None


def sleep_until(epoch_s: float) -> None:
    time.sleep(max(0.0, epoch_s - time.time()))


async def fetch(dsn: str, sql: str, *args: Any) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        return [dict(r) for r in await conn.fetch(sql, *args)]
    finally:
        await conn.close()


def handover_at(logs: list[Path], why: str, mentions: str, after: float, timeout_s: float) -> float | None:
    """When the first `wake.handover` with `why` naming `mentions` was logged after `after`."""
    def seen() -> float | None:
        times = [at(e) for log in logs for e in events(log, "wake.handover")
                 if e.get("why") == why and mentions in (e.get("from"), e.get("to")) and at(e) >= after - 1]
        return min(times) if times else None
    found: float | None = poll(seen, timeout_s, 0.5)
    return found


def run_mode(mode: str, args: argparse.Namespace, root: Path, pg: Postgres, rds: Redis) -> dict[str, Any]:
    db, jitter = f"bench_{mode}", int(args.every * args.jitter_share)

    async def migrate() -> None:
        admin = await asyncpg.connect(pg.dsn(db="postgres"))
        await admin.execute(f"DROP DATABASE IF EXISTS {db}")
        await admin.execute(f"CREATE DATABASE {db}")
        await admin.close()
        conn = await asyncpg.connect(pg.dsn(db=db))
        await schema.migrate(conn)
        await conn.close()

    asyncio.run(migrate())
    __import__("redis").Redis(host="127.0.0.1", port=rds.port).flushall()
    here = root / mode
    here.mkdir()
    ports = [free_port() for _ in range(args.replicas)]
    replicas = Replicas(here, here / "unused.toml")
    procs, spawned = [], []
    for i, port in enumerate(ports):
        cfg = here / f"wake-{i}.toml"
        cfg.write_text(config_text(pg.dsn(db=db), f"redis://127.0.0.1:{rds.port}/0", args.agents, args.every, jitter, mode, port, args.heartbeat_s,
                                     args.event_loop))
        replicas.config = cfg
        spawned.append(time.time())
        procs.append(replicas.start())
    logs = [here / f"replica-{i}.log" for i in range(args.replicas)]
    try:
        readies = [first_event(log, "daemon.ready", START_BOUND_S) for log in logs]
        missing = sum(r is None for r in readies)
        if missing:
            raise RuntimeError(f"{missing} of {args.replicas} replicas not ready within {START_BOUND_S:g}s")
        ready = [at(r) - s for r, s in zip(readies, spawned, strict=True) if r is not None]
        ids = [r["replica"] for r in readies if r is not None]
        rss_ready = [round(rss_mib(p.pid), 1) for p in procs]
        # the measured slot: the first boundary `settle_s` after the last replica is ready
        slot = (int(time.time() + args.settle_s) // args.every + 1) * args.every
        margin = (args.every - jitter) / 2  # the quiet gap between one slot's last fire and the next slot
        sleep_until(slot - margin)
        before, b0, b1 = read_claims(ports, 120)
        sleep_until(slot + jitter + margin)
        rss_end = [round(rss_mib(p.pid), 1) for p in procs]
        # A backlog may still be firing (the replicas behind the rate) and may even reach the next
        # slot: the attempts are divided by the slots claimed between the same two reads, whatever
        # slot they were, so a late read changes nothing but the span (printed).
        after, a0, a1 = read_claims(ports, 600)
        slot_at = dt.datetime.fromtimestamp(slot, dt.UTC)
        won = asyncio.run(fetch(pg.dsn(db=db), "SELECT count(*) AS n FROM wake_slots WHERE claimed_at BETWEEN $1 AND $2",
                                dt.datetime.fromtimestamp((b0 + b1) / 2, dt.UTC), dt.datetime.fromtimestamp((a0 + a1) / 2, dt.UTC)))[0]["n"]
        # Replicas behind the rate are still working off the slot: its rows are counted once every
        # due agent has one, or once none came in a whole settle (bounded by another interval).
        rows_sql = "SELECT agent_id, started_at FROM wake_introspection_ledger WHERE scheduled_for = $1"
        rows = asyncio.run(fetch(pg.dsn(db=db), rows_sql, slot_at))
        stalled_at, give_up = time.time(), time.time() + args.every
        while len({r["agent_id"] for r in rows}) < args.agents and time.time() < min(give_up, stalled_at + args.settle_s):
            time.sleep(2)
            more = asyncio.run(fetch(pg.dsn(db=db), rows_sql, slot_at))
            if len(more) > len(rows):
                stalled_at = time.time()
            rows = more
        counted_at = time.time() - slot
        firsts = asyncio.run(fetch(pg.dsn(db=db), "SELECT pid, min(started_at) AS first FROM wake_introspection_ledger GROUP BY pid"))
        first_row = {r["pid"]: r["first"].timestamp() for r in firsts}
        lags = [(r["started_at"] - slot_at).total_seconds()
                - schedule.jitter_delay_s(schedule.Schedule(agent_id=r["agent_id"], tier="whisper", timezone="UTC", every_s=args.every,
                                                            jitter_s=jitter), slot_at) for r in rows]
        result: dict[str, Any] = {
            "mode": mode, "ready_s": [round(s, 1) for s in ready],
            "first_fire_s": [round(first_row[p.pid] - s, 1) if p.pid in first_row else None for p, s in zip(procs, spawned, strict=True)],
            "fire_lag_p50_s": round(pct(lags, 0.5), 3), "fire_lag_p99_s": round(pct(lags, 0.99), 3),
            "claims_per_slot": round((after - before) / won, 3) if won and before is not None and after is not None else None,
            "claims_read": {"slots": won, "before_read_s": round(b1 - b0, 1), "after_read_s": round(a1 - a0, 1),
                            "after_read_at_s": round(a0 - slot, 1)},
            "fired": len({r["agent_id"] for r in rows}), "fired_counted_at_s": round(counted_at, 1),
            "extra_rows": len(rows) - len({r["agent_id"] for r in rows}), "due": args.agents,
            "rss_ready_mib": rss_ready, "rss_end_mib": rss_end,
        }
        if mode == "rendezvous":
            killed_at = time.time()
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(10)
            replicas.live.remove(procs[0])
            took = handover_at(logs[1:], "expired", ids[0], killed_at, 120)
            result["takeover_s"] = round(took - killed_at, 1) if took else None
            # a survivor that took the dead one's agents over, stopped: the drain must not wait out their jitter
            heirs = [i for i in range(1, args.replicas) if any(e.get("why") == "expired" and e.get("to") == ids[i]
                                                               for e in events(logs[i], "wake.handover"))]
            victim = heirs[0] if heirs else 1
            result["stopped_heir"] = bool(heirs)
        else:
            victim = 0
        termed_at = time.time()
        procs[victim].send_signal(signal.SIGTERM)
        try:
            procs[victim].wait(120)
            result["sigterm_exit_s"] = round(time.time() - termed_at, 1)
        except subprocess.TimeoutExpired:
            result["sigterm_exit_s"] = None
        replicas.live.remove(procs[victim])
        if mode == "rendezvous":
            others = [log for i, log in enumerate(logs) if i not in (0, victim)]
            took = handover_at(others, "stopped", ids[victim], termed_at, 60)
            result["sigterm_handover_s"] = round(took - termed_at, 1) if took else None
        return result
    finally:
        replicas.stop_all()
        replicas.kill_all()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--agents", type=int, default=20000)
    p.add_argument("--every", type=int, default=180, help="each agent's whisper interval, seconds")
    p.add_argument("--jitter-share", type=float, default=0.9, help="jitter_s as a share of the interval (the fires' spread)")
    p.add_argument("--settle-s", type=float, default=15, help="how long after the last replica's ready the measured slot may start")
    p.add_argument("--heartbeat-s", type=float, default=10.0,
                   help="[daemon] heartbeat_s (its default, 10: at 2 s and 20,000 agents the replicas' heartbeats expired , their loops busy)")
    p.add_argument("--modes", default="rendezvous,every_replica")
    p.add_argument("--event-loop", choices=("uvloop", "asyncio"), default=None,
                   help="[daemon] event_loop of every replica (default: the daemon's own, uvloop)")
    p.add_argument("--dir")
    args = p.parse_args()
    if not 0 < args.jitter_share < 1:
        p.error("--jitter-share must be above 0 and below 1 (the window needs a quiet gap before the next slot)")
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="wake-replicas-"))
    root.mkdir(parents=True, exist_ok=True)
    pg, rds = Postgres(root), Redis(root)
    pg.start()
    rds.start()
    try:
        print(f"replicas bench: {args.replicas} replicas x {args.agents} agents, one whisper every {args.every}s "
              f"(jitter {int(args.every * args.jitter_share)}s: {args.agents / args.every:.0f} fires a second), "
              f"heartbeat {args.heartbeat_s:g}s, stated takeover bound {4 * args.heartbeat_s:g}s, "
              f"event loop {args.event_loop or 'the daemon default'}", flush=True)
        for mode in args.modes.split(","):
            r = run_mode(mode, args, root, pg, rds)
            print(f"{mode}: fired {r['fired']}/{r['due']} by {r['fired_counted_at_s']}s after the slot (extra rows {r['extra_rows']}), "
                  f"claims/slot {r['claims_per_slot']}, "
                  f"lag p50 {r['fire_lag_p50_s']}s p99 {r['fire_lag_p99_s']}s", flush=True)
            c = r["claims_read"]
            print(f"  claims counted over {c['slots']} slots claimed between the reads (the reads took {c['before_read_s']}s "
                  f"and {c['after_read_s']}s; the second began {c['after_read_at_s']}s after the slot)", flush=True)
            print(f"  start to ready s {r['ready_s']}, to first fire s {r['first_fire_s']}", flush=True)
            print(f"  rss MiB at ready {r['rss_ready_mib']}, at the window's end {r['rss_end_mib']}", flush=True)
            if mode == "rendezvous":
                handed = "n/a (no third replica)" if r["sigterm_handover_s"] is None else f"{r['sigterm_handover_s']}s"
                whom = "a replica that took agents over" if r["stopped_heir"] else "a replica"
                print(f"  takeover after kill -9 {r['takeover_s']}s; SIGTERM of {whom}: "
                      f"hand-over {handed}, exit {r['sigterm_exit_s']}s", flush=True)
            else:
                print(f"  SIGTERM of a replica: exit {r['sigterm_exit_s']}s", flush=True)
    finally:
        rds.stop()
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
