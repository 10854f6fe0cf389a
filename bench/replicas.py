"""Scale bench: R daemon replicas (real processes) × A agents on one PostgreSQL and one Redis, memory
off, no model, once with each agent scheduled by its owner alone (`ownership = "rendezvous"`) and
once the old way (`every_replica`: every replica schedules every agent and races for each claim),
in the same run on the same stores. Prints figures; it is not a timed test.

    python bench/replicas.py [--replicas 4] [--agents 20000] [--every 600] [--jitter 600]
                             [--warmup-s 60] [--duration-s 180] [--modes rendezvous,every_replica] [--dir DIR]

Per mode, over the slots due in the measured window (after the warm-up):

- fire lag: from each slot plus its jitter delay to its wake's row starting, p50/p99;
- claim attempts per slot: every replica's `wake_slot_claims_total` (won + taken) over the window,
  against the slots claimed in it;
- slots fired of due: rows in the window against the slots the schedules name;
- resident memory per replica (VmRSS) at the end of the window;
- takeover after kill -9 (rendezvous only): from the kill to the survivors' `wake.handover`
  (`why=expired`) for the dead replica's agents; the stated bound is 3 heartbeats plus one.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import asyncpg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.chaos import Postgres, Redis, Replicas, free_port  # noqa: E402
from ledgers import schema  # noqa: E402
from wake.daemon import schedule  # noqa: E402

BEAT_S = 2.0


def config_text(dsn: str, redis_url: str, agents: int, every_s: int, jitter_s: int, mode: str, listen: int) -> str:
    lines = [
        f'[postgres]\ndsn = "{dsn}"\npool_max_size = 16\n[redis]\nurl = "{redis_url}"\n[metrics]\nlisten = "127.0.0.1:{listen}"\n',
        f'[daemon]\nheartbeat_s = {BEAT_S:g}\nlease_ttl_s = 10\nbusy_wait_s = 0\nownership = "{mode}"\n',
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


def claims(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("wake_slot_claims_total{"))


def wait_ready(root: Path, n: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum('"daemon.ready"' in p.read_text(errors="replace") for p in root.glob("replica-*.log")) >= n:
            return
        time.sleep(1)
    raise RuntimeError(f"{n} replicas not ready within {timeout_s:g}s")


async def window_rows(dsn: str, first: dt.datetime, last: dt.datetime) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        return [dict(r) for r in await conn.fetch(
            "SELECT agent_id, scheduled_for, started_at FROM wake_introspection_ledger WHERE scheduled_for > $1 AND scheduled_for <= $2",
            first, last)]
    finally:
        await conn.close()


async def claimed_between(dsn: str, first: dt.datetime, last: dt.datetime) -> int:
    """Slots claimed (won) in [first, last]: the denominator of claim attempts over the same time."""
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM wake_slots WHERE claimed_at BETWEEN $1 AND $2", first, last))
    finally:
        await conn.close()


def takeover_s(root: Path, dead: str, killed_at: dt.datetime, timeout_s: float) -> float | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for path in root.glob("replica-*.log"):
            for line in path.read_text(errors="replace").splitlines():
                if '"wake.handover"' in line and dead in line and '"expired"' in line:
                    e = json.loads(line)
                    return (dt.datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")) - killed_at).total_seconds()
        time.sleep(0.5)
    return None


def run_mode(mode: str, args: argparse.Namespace, root: Path, pg: Postgres, rds: Redis) -> dict[str, Any]:
    db = f"bench_{mode}"

    async def migrate() -> None:
        admin = await asyncpg.connect(pg.dsn(db="postgres"))
        await admin.execute(f"DROP DATABASE IF EXISTS {db}")
        await admin.execute(f"CREATE DATABASE {db}")
        await admin.close()
        conn = await asyncpg.connect(pg.dsn(db=db))
        await schema.migrate(conn)
        await conn.close()

    asyncio.run(migrate())
    rds_flush = __import__("redis").Redis(host="127.0.0.1", port=rds.port)
    rds_flush.flushall()
    here = root / mode
    here.mkdir()
    ports = [free_port() for _ in range(args.replicas)]
    replicas = Replicas(here, here / "unused.toml")
    procs = []
    for i, port in enumerate(ports):
        cfg = here / f"wake-{i}.toml"
        cfg.write_text(config_text(pg.dsn(db=db), f"redis://127.0.0.1:{rds.port}/0", args.agents, args.every, args.jitter, mode, port))
        replicas.config = cfg
        procs.append(replicas.start())
    try:
        wait_ready(here, args.replicas, timeout_s=600)
        time.sleep(args.warmup_s)
        first = dt.datetime.now(dt.UTC)
        before = sum(claims(p) for p in ports)
        time.sleep(args.duration_s)
        last = dt.datetime.now(dt.UTC)
        after = sum(claims(p) for p in ports)
        won = asyncio.run(claimed_between(pg.dsn(db=db), first, last))
        rss = [round(rss_mib(p.pid), 1) for p in procs]
        time.sleep(args.jitter + 10)  # the window's last slots wait out their jitter, then run
        rows = asyncio.run(window_rows(pg.dsn(db=db), first, last))
        sched = {a: schedule.Schedule(agent_id=a, tier="whisper", timezone="UTC", every_s=args.every, jitter_s=args.jitter)
                 for a in (f"s{i:06d}" for i in range(args.agents))}
        lags = [(r["started_at"] - r["scheduled_for"]).total_seconds() - schedule.jitter_delay_s(sched[r["agent_id"]], r["scheduled_for"])
                for r in rows]
        n_first, n_last = int(first.timestamp()) // args.every + 1, int(last.timestamp()) // args.every
        due = args.agents * max(0, n_last - n_first + 1)
        result: dict[str, Any] = {
            "mode": mode, "fire_lag_p50_s": round(pct(lags, 0.5), 3), "fire_lag_p99_s": round(pct(lags, 0.99), 3),
            "claim_attempts": after - before, "rows": len(rows), "due": due, "rss_mib": rss,
        }
        result["claims_per_slot"] = round((after - before) / won, 3) if won else None
        if mode == "rendezvous":
            victim = procs[0]
            dead = next(json.loads(line)["replica"] for line in (here / "replica-0.log").read_text().splitlines() if '"daemon.ready"' in line)
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            replicas.live.remove(victim)
            result["takeover_s"] = takeover_s(here, dead, dt.datetime.now(dt.UTC), timeout_s=120)
        return result
    finally:
        replicas.stop_all()
        replicas.kill_all()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--agents", type=int, default=20000)
    p.add_argument("--every", type=int, default=600, help="each agent's whisper interval, seconds")
    p.add_argument("--jitter", type=int, default=600, help="each tier's jitter_s (spreads the fires over the interval)")
    p.add_argument("--warmup-s", type=float, default=60)
    p.add_argument("--duration-s", type=float, default=180)
    p.add_argument("--modes", default="rendezvous,every_replica")
    p.add_argument("--dir")
    args = p.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="wake-replicas-"))
    root.mkdir(parents=True, exist_ok=True)
    pg, rds = Postgres(root), Redis(root)
    pg.start()
    rds.start()
    try:
        print(f"replicas bench: {args.replicas} replicas x {args.agents} agents, one whisper every {args.every}s (jitter {args.jitter}s), "
              f"warm-up {args.warmup_s:g}s, window {args.duration_s:g}s; heartbeat {BEAT_S:g}s, stated takeover bound {4 * BEAT_S:g}s")
        print(f"{'mode':<14} {'lag p50':>8} {'lag p99':>8} {'claims/slot':>11} {'fired/due':>12} {'takeover':>9}  rss MiB per replica")
        for mode in args.modes.split(","):
            r = run_mode(mode, args, root, pg, rds)
            take = f"{r['takeover_s']:.1f}s" if r.get("takeover_s") is not None else "n/a"
            print(f"{mode:<14} {r['fire_lag_p50_s']:>7}s {r['fire_lag_p99_s']:>7}s {r['claims_per_slot']!s:>11} {r['rows']:>5}/{r['due']:<6} "
                  f"{take:>9}  {r['rss_mib']}", flush=True)
    finally:
        rds.stop()
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
