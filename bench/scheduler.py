"""Scheduler benchmark: one daemon, many agents, short intervals, the embedded stores, no model.
Prints figures; it is not a timed test.

    python bench/scheduler.py [--agents 1000[,5000]] [--duration-s 40] [--whisper 30s] [--surface 60s]
                              [--full-cron "*/2 * * * *"] [--jitter-s 0[,10]] [--max-concurrent N]
                              [--state-dir DIR] [--no-bare]

Each (agents, jitter) pair is one daemon run; each agent count is also run once on bare
APScheduler (the same number of jobs, interval and cron triggers, a job that only notes the
time), in the same process, so the daemon's lag stands next to the floor of this machine now.

Every agent has the three tiers and its memory off (no git repository per agent, no canary);
each fire goes the whole way: slot claim in PostgreSQL, lease and
fence (Redis + PostgreSQL), the wake (the default sources, manifest, ledger row, settle),
release. Figures, over the slots that fell after a warm-up:

- lag from when the job is due (the slot plus its jitter delay) to the job firing, and to the
  wake running (claimed and leased), p50/p99;
- wakes per second (settled wakes / measured window) against the rate the schedules ask for;
- resident memory now and at its peak;
- the lease and claim overhead per wake (claim + acquire and close-abandoned + release), p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

# `--code DIR`: run the daemon of another checkout (bench/before_after.py runs the base commit's)
_CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(Path(__file__).resolve().parents[1])
sys.path.insert(0, _CODE)

from wake import config as wake_config  # noqa: E402
from wake import logs  # noqa: E402
from wake.daemon import notify, running, schedule  # noqa: E402
from wake.daemon import service as daemon  # noqa: E402
from wake.stores import Stores, engines  # noqa: E402

_ACQUIRES: list[float] = []
_PG_CONN = Stores.pg_conn


@contextlib.asynccontextmanager
async def _timed_pg_conn(self: Stores, *, trusted: bool = True) -> AsyncIterator[Any]:
    """`Stores.pg_conn`, noting how long each use waited for a pooled connection."""
    t0 = time.perf_counter()
    async with _PG_CONN(self, trusted=trusted) as conn:
        _ACQUIRES.append((time.perf_counter() - t0) * 1000)
        yield conn


Stores.pg_conn = _timed_pg_conn  # type: ignore[method-assign]

WARMUP_S = 10
SAMPLE_S = 0.05

_ACTIVITY = """
SELECT coalesce(wait_event_type, 'CPU') AS type, coalesce(wait_event, state) AS event, state, count(*) AS n
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
 GROUP BY 1, 2, 3
"""
_BLOCKED = """
SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query, count(*) AS n
  FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock'
 GROUP BY 1
"""
_WAITING = """
SELECT l.locktype, l.mode, coalesce(c.relname, '') AS relation, count(*) AS n
  FROM pg_locks AS l LEFT JOIN pg_class AS c ON c.oid = l.relation
 WHERE NOT l.granted
 GROUP BY 1, 2, 3
"""


async def sample_locks(d: daemon.Daemon, stop: asyncio.Event, found: dict[str, Counter[str]]) -> None:
    """Every SAMPLE_S, on a connection of its own: what the daemon's backends are doing
    (`pg_stat_activity`: waiting on a lock, on the WAL flush, idle in a transaction, running) and
    which locks they wait for (`pg_locks`, not granted)."""
    import asyncpg

    conn = await asyncpg.connect(*d.stores.pg._connect_args, **{  # type: ignore[attr-defined]  # the daemon's own DSN
        k: v for k, v in d.stores.pg._connect_kwargs.items() if k in ("host", "port", "user", "password", "database")  # type: ignore[attr-defined]
    })
    try:
        while not stop.is_set():
            for row in await conn.fetch(_ACTIVITY):
                found["activity"][f"{row['type']}:{row['event']}" + (f" ({row['state']})" if row["type"] != "CPU" else "")] += row["n"]
            for row in await conn.fetch(_BLOCKED):
                found["blocked"][row["query"]] += row["n"]
            for row in await conn.fetch(_WAITING):
                found["locks"][f"{row['locktype']} {row['mode']} {row['relation']}".strip()] += row["n"]
            found["samples"]["n"] += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_S)
    finally:
        await conn.close()


def _print_samples(found: dict[str, Counter[str]]) -> None:
    n = found["samples"]["n"] or 1
    print(f"PostgreSQL sampled every {SAMPLE_S * 1000:.0f} ms ({n} samples), backends per sample:")
    for key, count in found["activity"].most_common(8):
        print(f"  {count / n:6.2f}  {key}")
    waits = sum(found["locks"].values())
    print(f"  lock waits per sample {waits / n:.3f}" + "".join(f"; {key} {c / n:.3f}" for key, c in found["locks"].most_common(4)))
    for query, count in found["blocked"].most_common(4):
        print(f"    {count / n:6.3f} waiting: {query}")


def _config(state_dir: Path, args: argparse.Namespace) -> wake_config.Config:
    agents, whisper, surface, full_cron, jitter = args.agents, args.whisper, args.surface, args.full_cron, args.jitter_s
    lines = [
        f'state_dir = "{state_dir}"',
        "[postgres]\npool_max_size = 16",
        f"[daemon]\nheartbeat_s = 5\nbusy_wait_s = 0\nmax_concurrent_wakes = {args.max_concurrent}",
    ]
    for i in range(agents):
        a = f"agents.a{i:04d}"
        lines.append(
            # memory off: 5,000 agents would otherwise be 5,000 git repositories (and a canary audit per wake)
            f'[{a}]\ntimezone = "UTC"\n[{a}.memory]\nenabled = false\n'
            f'[{a}.tiers.whisper]\nevery = "{whisper}"\njitter_s = {jitter}\nbinds = ["wake.whisper"]\n'
            f'[{a}.tiers.surface]\nevery = "{surface}"\njitter_s = {jitter}\nbinds = ["wake.surface"]\n'
            f'[{a}.tiers.full]\ncron = "{full_cron}"\njitter_s = {jitter}\nbinds = ["wake"]\n'
        )
    path = state_dir / "wake.toml"
    path.write_text("\n".join(lines))
    return wake_config.load_config_file(path, environ={})


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _rss_kib() -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def _due(d: daemon.Daemon, start: dt.datetime, end: dt.datetime) -> int:
    """How many slots in [start, end) were due (slot plus jitter) before `end`: the fires the
    window should have seen, so a fire that never came shows as a gap, not as no lag."""
    return sum(
        1
        for sched in d.schedules.values()
        for slot in schedule.fires_between(sched, start - dt.timedelta(microseconds=1), end)
        if slot < end and slot + dt.timedelta(seconds=schedule.jitter_delay_s(sched, slot)) < end
    )


async def main(args: argparse.Namespace, state_dir: Path) -> float:
    logs.configure("json", "error", stream=sys.stderr)
    print(f"building the config: {args.agents} agents x 3 tiers ...", flush=True)
    config = _config(state_dir, args)
    timings: list[running.Timing] = []
    d = daemon.Daemon(config=config, notifier=notify.Notifier(None), timings=timings, handle_signals=False)
    _ACQUIRES.clear()
    runner = asyncio.create_task(d.run())
    while d.opened is None or not d.scheduler.running:
        await asyncio.sleep(0.2)
        if runner.done():
            runner.result()
    began = dt.datetime.now(dt.UTC)
    print(f"daemon up ({len(d.schedules)} jobs); running {args.duration_s:.0f}s, first {WARMUP_S}s are warm-up ...", flush=True)
    found: dict[str, Counter[str]] = {"activity": Counter(), "locks": Counter(), "blocked": Counter(), "samples": Counter()}
    stop = asyncio.Event()
    await asyncio.sleep(WARMUP_S)
    sampler = asyncio.create_task(sample_locks(d, stop, found))
    await asyncio.sleep(max(0.0, args.duration_s - WARMUP_S))
    stop.set()
    await sampler
    ended = dt.datetime.now(dt.UTC)
    rss, peak = _rss_kib()
    d.request_stop()
    await runner

    window_start = began + dt.timedelta(seconds=WARMUP_S)
    measured = [t for t in timings if window_start <= t.slot < ended]
    ran = [t for t in measured if t.outcome in ("completed", "quiet")]
    fire_lag = [(t.started - (getattr(t, "due", None) or t.slot)).total_seconds() * 1000 for t in measured]
    run_lag = [((t.running_at - t.slot).total_seconds() - t.jitter_s) * 1000 for t in ran if t.running_at]
    overhead = [t.claim_ms + t.lease_ms + t.release_ms for t in ran]
    window_s = (ended - window_start).total_seconds()
    every_s = {"whisper": wake_config.parse_duration_s(args.whisper), "surface": wake_config.parse_duration_s(args.surface)}
    asked = args.agents * (1 / every_s["whisper"] + 1 / every_s["surface"])
    outcomes: dict[str, int] = {}
    for t in measured:
        key = str(t.outcome or "unfinished")  # a Status prints as its value, not its repr
        outcomes[key] = outcomes.get(key, 0) + 1

    print(
        f"\nagents x tiers            {args.agents} x 3 = {len(d.schedules)} jobs; whisper {args.whisper}, surface {args.surface}, "
        f"full cron {args.full_cron!r}, jitter {args.jitter_s}s, {args.max_concurrent} wakes at once"
    )
    print(f"measured window           {window_s:.1f}s; slots fired {len(measured)} of {_due(d, window_start, ended)} due; outcomes {outcomes}")
    print(
        f"lag slot -> job fired     p50 {_pct(fire_lag, 0.5):8.1f} ms   p99 {_pct(fire_lag, 0.99):8.1f} ms   "
        f"max {max(fire_lag, default=float('nan')):8.1f} ms"
    )
    print(f"lag due -> wake running   p50 {_pct(run_lag, 0.5):8.1f} ms   p99 {_pct(run_lag, 0.99):8.1f} ms")
    print(f"wakes per second          {len(ran) / window_s:8.1f}  (whisper and surface ask ~{asked:.0f}/s, plus full per its cron)")
    print(f"wake duration             p50 {_pct([t.wake_ms for t in ran], 0.5):8.1f} ms   p99 {_pct([t.wake_ms for t in ran], 0.99):8.1f} ms")
    print(
        f"lease+claim overhead      p50 {_pct(overhead, 0.5):8.2f} ms   p99 {_pct(overhead, 0.99):8.2f} ms   "
        f"mean {statistics.fmean(overhead) if overhead else float('nan'):.2f} ms per wake"
    )
    print(
        f"  of which claim          p50 {_pct([t.claim_ms for t in ran], 0.5):8.2f} ms; "
        f"lease acquire+close p50 {_pct([t.lease_ms for t in ran], 0.5):.2f} ms; release p50 {_pct([t.release_ms for t in ran], 0.5):.2f} ms"
    )
    print(f"pooled connection wait    p50 {_pct(_ACQUIRES, 0.5):8.2f} ms   p99 {_pct(_ACQUIRES, 0.99):8.2f} ms   "
          f"({len(_ACQUIRES)} uses, pool_max_size {config.postgres.pool_max_size})")
    print(f"resident memory           {rss / 1024:8.1f} MiB now, {peak / 1024:.1f} MiB peak")
    _print_samples(found)
    return _pct(fire_lag, 0.99)


async def bare(args: argparse.Namespace, agents: int) -> float:
    """Bare APScheduler, the same job count: the floor of the fire lag on this machine now."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    lags: list[float] = []
    began = time.time()

    async def job(period_s: float) -> None:
        now = time.time()
        if now - began > WARMUP_S / 2:
            lags.append((now - (now // period_s) * period_s) * 1000)

    scheduler = AsyncIOScheduler(timezone=dt.UTC, job_defaults={"coalesce": True, "misfire_grace_time": None, "max_instances": 1})
    scheduler.start()
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    whisper_s, surface_s = wake_config.parse_duration_s(args.whisper), wake_config.parse_duration_s(args.surface)
    for _ in range(agents):
        scheduler.add_job(job, IntervalTrigger(seconds=whisper_s, start_date=epoch), args=[whisper_s])
        scheduler.add_job(job, IntervalTrigger(seconds=surface_s, start_date=epoch), args=[surface_s])
        scheduler.add_job(job, CronTrigger.from_crontab(args.full_cron, timezone=dt.UTC), args=[120.0])
    await asyncio.sleep(min(args.duration_s, whisper_s + WARMUP_S / 2 + 1))
    scheduler.shutdown(wait=False)
    print(f"bare APScheduler, {agents * 3} jobs: fire lag p50 {_pct(lags, 0.5):8.1f} ms   p99 {_pct(lags, 0.99):8.1f} ms  ({len(lags)} fires)")
    return _pct(lags, 0.99)


async def all_runs(args: argparse.Namespace, state_dir: Path) -> None:
    results = []
    for agents in [int(a) for a in str(args.agents).split(",")]:
        floor = await bare(args, agents) if not args.no_bare else float("nan")
        for jitter in [int(j) for j in str(args.jitter_s).split(",")]:
            run_dir = state_dir / f"a{agents}-j{jitter}"
            run_dir.mkdir(parents=True, exist_ok=True)
            p99 = await main(argparse.Namespace(**{**vars(args), "agents": agents, "jitter_s": jitter}), run_dir)
            results.append((agents, jitter, p99, floor))
    print("\nagents  jitter  fire lag p99 (daemon)  bare APScheduler p99  ratio")
    for agents, jitter, p99, floor in results:
        print(f"{agents:6d}  {jitter:5d}s  {p99:18.1f} ms  {floor:17.1f} ms  {p99 / floor:6.1f}x")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", default="1000", help="one count, or several: 1000,5000")
    parser.add_argument("--duration-s", type=float, default=40)
    parser.add_argument("--whisper", default="30s")
    parser.add_argument("--surface", default="60s")
    parser.add_argument("--full-cron", default="*/2 * * * *")
    parser.add_argument("--jitter-s", default="0,10", help="one jitter, or several: 0,10")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare APScheduler run")
    parser.add_argument("--max-concurrent", type=int, default=16)
    parser.add_argument("--state-dir", type=Path)
    parser.add_argument("--code", help="the checkout whose daemon runs (default: this one)")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.state_dir:
        args.state_dir.mkdir(parents=True, exist_ok=True)
        asyncio.run(all_runs(args, args.state_dir.resolve()))
    else:
        with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
            try:
                asyncio.run(all_runs(args, Path(tmp)))
            finally:  # before the directories go: nothing outlives the run
                for run_dir in Path(tmp).iterdir():
                    with contextlib.suppress(Exception):
                        engines.stop(run_dir, force=True)
    print(f"(total {time.perf_counter() - started:.0f}s)")
