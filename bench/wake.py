"""Daemon-path wake benchmark on the embedded stores, no model. Prints figures; it is not a timed test.

    python bench/wake.py [--agents 16] [--wakes 200] [--state-dir DIR] [--profile N] [--steps N] [--apart N] [--loop uvloop,asyncio]

Each wake goes the way a scheduled slot goes (`wake.run.claim.run` with a claim): slot claim,
lease and fence, close-abandoned, the default sources of a whisper, manifest, row, settle,
release. The whisper has a model route (the scripted server of the tests): each agent's first
whisper calls it, and the gate settles every later one `quiet` without a call, as a whisper with
nothing new does in production. Figures:

1. PostgreSQL round trips and commits of one whisper, counted by a connection class that counts
   every message exchange (the pool's reset included), and Redis commands, from Redis's own
   `INFO commandstats`. Counts, not times: stable on a noisy machine.
2. One whisper at a time: p50 and p99.
3. Wakes per second on one event loop: `--agents` whispers at once, over and over.
4. The machine's cost of sleeping: a fixed piece of Python in 10 parts, its CPU (this thread's,
   around the parts only) back to back and then with a PostgreSQL round trip between the parts,
   as a whisper one at a time has. The second costs more on the same code: what the process
   finds gone cold after each sleep. It is why a whisper one at a time costs more CPU than one
   among 16 at once, and it differs from machine to machine.

`--profile N` then runs 200 more whispers one at a time under cProfile (scoped) and prints the N
functions with the most cumulative time and the N with the most time of their own.

`--steps N` then runs N more whispers one at a time (scoped) and prints this process's CPU inside
each of a whisper's steps (`time.process_time` around the step's function: the claim, the
ledgers' reads of step 4 in one statement (the canary's, the tier's flows, the previous wakes; a
checkout from before reads the previous wakes on their own), the memory and its canary, the
binding, the arrival, the settled row) and in the rest of
the wake, per whisper. No sampling and no tracing hook: the figures add up to the whisper's CPU,
and a step that awaits counts the loop's work for its own round trips (nothing else runs).

`--apart N` then runs 2N more whispers one at a time, alternating (ABBA) between step 4's reads
in one statement (`wake.run.cycle._read_ledgers`, as the daemon runs) and each read on its own
where it is used (the path a failed statement falls back to: three round trips, as before they
were one), and prints this process's CPU per whisper of each: the same process, stores and load,
so the machine's drift falls on both alike.

`--loop` names the event loops to run the whole bench on, one after the other, on the same stores
and agents: by default the daemon's (`daemon.event_loop`, uvloop) and then asyncio's, the baseline.

Figures 1 and 2 are printed twice, in the same run: with the tool connections scoped to their agent
(the tool role's pool, row-level security: docs/isolation.md), and with `ctx.read()`/`ctx.write()`
served from the harness's own pool as before that change (`unscoped`, the baseline). The one-at-a-
time whispers alternate between the two, so a drift of the machine's load falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import dataclasses
import datetime as dt
import hashlib
import importlib
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg

# `--code DIR`: time another checkout's wake (bench/before_after.py runs the base commit's)
sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(Path(__file__).resolve().parents[1]))

from tests.support.openai_server import ScriptedServer  # noqa: E402
from tests.support.pg_count import CountingConnection, counted_pools  # noqa: E402
from wake import clock, logs  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake.context import WakeRequest  # noqa: E402
from wake.daemon import running  # noqa: E402
from wake.run import claim, cycle, session  # noqa: E402
from wake.stores import Stores, engines  # noqa: E402

try:
    from memory.stamp import RACY_NS
except ImportError:  # code from before the work tree's stamp (--code): no window to wait out
    RACY_NS = 0

try:
    from wake.cli import app
    DAEMON_LOOP: str = wake_config.DaemonConfig().event_loop
    app.loop_factory  # noqa: B018  (a base checkout without it: asyncio only)
except AttributeError:  # code from before the daemon's choice of loop (--code)
    app, DAEMON_LOOP = None, "asyncio"  # type: ignore[assignment]

_SCOPED = getattr(Stores, "scoped_conn", None)  # None: code from before the tool role (--code), unscoped already


@contextlib.contextmanager
def _unscoped() -> Any:
    """Tool connections from the harness's own pool: what `ctx.read()`/`ctx.write()` were before."""
    if _SCOPED is None:
        yield
        return
    Stores.scoped_conn = lambda self, agent_id: self.pg_conn(trusted=False)  # type: ignore[method-assign]
    try:
        yield
    finally:
        Stores.scoped_conn = _SCOPED  # type: ignore[method-assign]


def _config(state_dir: Path, agents: int, url: str) -> wake_config.Config:
    lines = [f'state_dir = "{state_dir}"', "[postgres]\npool_max_size = 16", f'[models.scripted]\nbase_url = "{url}"\nmodel = "scripted-1"\n']
    for i in range(agents):
        a = f"agents.a{i:03d}"
        lines.append(f'[{a}]\ntimezone = "UTC"\n[{a}.tiers.whisper]\nevery = "30s"\nbinds = ["wake.whisper"]\nmodel = "scripted"\n')
    path = state_dir / "wake.toml"
    path.write_text("\n".join(lines))
    return wake_config.load_config_file(path, environ={})


_SLOT = [dt.datetime(2020, 1, 1, tzinfo=dt.UTC)]


def _request(agent: str) -> WakeRequest:
    _SLOT[0] += dt.timedelta(seconds=30)
    return WakeRequest(agent_id=agent, tier="whisper", trigger="schedule", scheduled_for=_SLOT[0], wake_id=uuid.uuid4())


_TIMINGS: list[running.Timing] = []


async def _one(s: session.Session, agent: str) -> float:
    """One whisper through the claim's steps (`wake.run.claim`), each timed."""
    t0 = time.perf_counter()
    timing = running.Timing()
    async with claim.started(s, _request(agent), claim.Claim(by="bench"), owner=claim.owner()) as wake:
        assert wake is not None
        m2 = clock.monotonic_ms()
        outcome = await claim.ran(s, wake)
        m3 = clock.monotonic_ms()
    timing.claim_ms, timing.lease_ms, timing.wake_ms, timing.release_ms = wake.claim_ms, wake.lease_ms, m3 - m2, clock.monotonic_ms() - m3
    assert outcome.status in ("completed", "quiet"), outcome
    _TIMINGS.append(timing)
    return (time.perf_counter() - t0) * 1000


def _claims(timings: list[running.Timing]) -> str:
    overhead = [t.claim_ms + t.lease_ms + t.release_ms for t in timings]
    return (f"claim p50 {statistics.median(t.claim_ms for t in timings):.2f} ms, "
            f"lease+claim+release p50 {statistics.median(overhead):.2f} ms per wake")


async def _floor(s: session.Session, runs: int, trips: int, commits: int) -> str:
    """The store floor of a whisper in this run: its PostgreSQL round trips, `commits` of them in
    transactions of one one-row insert each (BEGIN, INSERT, COMMIT: each waits for the WAL flush),
    the rest `SELECT 1`, and its 2 Redis round trips, on one connection: their wall time, and this
    process's CPU for them (what the round trips alone cost the process beside a whisper's)."""
    async with s.stores.pg_conn() as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_floor_logged (v int)")
        took = []
        cpu_started = time.process_time()
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(commits):
                async with conn.transaction():
                    await conn.execute("INSERT INTO bench_floor_logged VALUES (1)")
            for _ in range(trips - 3 * commits):
                await conn.fetchval("SELECT 1")
            await s.stores.redis.ping()
            await s.stores.redis.ping()
            took.append((time.perf_counter() - t0) * 1000)
        cpu_ms = (time.process_time() - cpu_started) * 1000 / runs
        await conn.execute("DROP TABLE bench_floor_logged")
    return f"p50 {statistics.median(took):.2f} ms  p99 {_pct(took, 0.99):.2f} ms; this process's CPU {cpu_ms:.2f} ms"


async def _redis_calls(s: session.Session) -> int:
    """Commands sent by clients: scripts count once (Redis also counts what they run inside)."""
    stats: dict[str, Any] = await s.stores.redis.info("commandstats")
    inside = ("cmdstat_set", "cmdstat_incr", "cmdstat_get", "cmdstat_del", "cmdstat_pexpire")
    return sum(int(v["calls"]) for k, v in stats.items() if k not in inside)


_COUNTING = {name: CountingConnection.__dict__[name] for name in ("execute", "_execute", "_executemany")}


_TAX_DOC = json.dumps({
    "blocks": {f"b{i}": {"hash": "f" * 64, "retrieval": "ok", "rows": i} for i in range(12)}, "tools": [f"t{i}" for i in range(20)],
})


@dataclasses.dataclass(frozen=True)
class _TaxRow:
    n: int
    text: str
    share: float


def _tax_part() -> int:
    """A fixed mix of what a wake's Python does between its round trips: JSON in and out,
    dataclasses built, a SHA-256, f-strings."""
    doc = json.loads(_TAX_DOC)
    rows = [_TaxRow(i, str(i), i * 1.5) for i in range(40)]
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    return len(digest) + sum(len(f"{r.n}:{r.text}:{r.share}") for r in rows)


async def _sleep_tax(s: session.Session, runs: int) -> str:
    """The same Python, 10 parts, timed by this thread's CPU around the parts only: back to back,
    then with a PostgreSQL round trip between the parts (the loop sleeps on each, as a whisper's
    does). What the second costs more is the machine's, not the wake's: code and data gone cold,
    a core's clock lowered while it idled."""
    spent = {False: 0.0, True: 0.0}
    async with s.stores.pg_conn() as conn:
        for i in range(runs * 2):
            apart = i % 2 == 1
            for _ in range(10):
                t0 = time.thread_time()
                _tax_part()
                spent[apart] += time.thread_time() - t0
                if apart:
                    await conn.fetchval("SELECT 1")
    together, apart = (spent[k] * 1000 / runs for k in (False, True))
    return f"{together:.3f} ms of CPU back to back, {apart:.3f} ms with a round trip between the parts (+{(apart / together - 1) * 100:.0f}%)"


def _stop_counting() -> None:
    """From here on the pools' connections are plain asyncpg ones: the figures time the wake, not
    the counter (which parses every statement it counts). Done on the class, so it holds for a
    base checkout's counter too (`--code`); `_count_again` undoes it for the next loop's run."""
    for name in _COUNTING:
        setattr(CountingConnection, name, getattr(asyncpg.Connection, name))


def _count_again() -> None:
    for name, fn in _COUNTING.items():
        setattr(CountingConnection, name, fn)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _memory_work(config: wake_config.Config, agent: str, runs: int) -> str:
    """What a quiet wake does with its memory, without the stores: open the repository, audit
    nothing new (the tip is the last audited commit; the work tree is clean) and list the tree for
    the `memory` block. In process, no round trip: the figure the memory's caches move."""
    try:
        from memory import cloister
        from memory.repo import MemoryRepo
    except ImportError:  # code from before the memory package (--code): it lived under ledgers
        from ledgers.memory import cloister  # type: ignore[no-redef]
        from ledgers.memory.repo import MemoryRepo  # type: ignore[no-redef]

    path, memory_config, at = config.memory_path(agent), config.memory_config(agent), dt.datetime.now(dt.UTC)
    head = MemoryRepo.open(path, memory_config, at=at).head()
    took = []
    for _ in range(runs):
        t0 = time.perf_counter()
        repo = MemoryRepo.open(path, memory_config, at=at)
        found = cloister.audit(repo, cloister.pending(repo, head), set(), set())
        assert not found.findings, found.findings
        repo.ls()
        took.append((time.perf_counter() - t0) * 1000)
    return f"p50 {statistics.median(took):.3f} ms  p99 {_pct(took, 0.99):.3f} ms"


async def _profile(agents: list[str], s: session.Session, top: int) -> None:
    """200 quiet whispers one at a time under cProfile: where a whisper's CPU goes."""
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(200):
        await _one(s, agents[i % len(agents)])
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    if os.environ.get("WAKE_BENCH_PROFILE_DUMP"):
        stats.dump_stats(os.environ["WAKE_BENCH_PROFILE_DUMP"])
    for key in ("cumulative", "tottime"):
        print(f"\nprofile of 200 quiet whispers, by {key}:")
        stats.sort_stats(key).print_stats(top)


# (label, module, function): the steps `--steps` times, each a module attribute the wake calls
# through its module, so wrapping the attribute times every call
STEPS = (
    ("claim (slot, lease, fence)", "wake.run.claim", "claimed"),
    ("ledgers' reads (step 4's)", "wake.run.cycle", "_read_ledgers"),
    ("memory (open, canary)", "wake.arrival.memory_blocks", "open_memory"),
    ("binding (and its flow)", "wake.run.cycle", "_bind"),
    ("previous wakes", "ledgers.introspection", "previous_both"),
    ("arrival (sources, diff)", "wake.run.cycle", "arrive"),
    ("settled row", "wake.run.settle", "record_settled"),
)


async def _steps(agents: list[str], s: session.Session, runs: int) -> None:
    """`runs` quiet whispers one at a time, with this process's CPU summed inside each step."""
    spent: dict[str, float] = {}
    originals: list[tuple[Any, str, Any]] = []

    def timed(label: str, fn: Any) -> Any:
        async def step(*a: Any, **kw: Any) -> Any:
            t0 = time.process_time()
            try:
                return await fn(*a, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - t0
        return step

    for label, module_name, name in STEPS:
        module = importlib.import_module(module_name)
        fn = getattr(module, name, None)
        if fn is None:  # a base checkout without this step (--code)
            continue
        originals.append((module, name, fn))
        setattr(module, name, timed(label, fn))
    try:
        cpu_started = time.process_time()
        for i in range(runs):
            await _one(s, agents[i % len(agents)])
        total = (time.process_time() - cpu_started) * 1000 / runs
    finally:
        for module, name, fn in originals:
            setattr(module, name, fn)
    print(f"\nthis process's CPU per quiet whisper by step, {runs} whispers one at a time: {total:.2f} ms in all")
    for label, _, _ in STEPS:
        if label in spent:
            print(f"  {label:<28} {spent[label] * 1000 / runs:6.3f} ms")
    print(f"  {'the rest of the wake':<28} {total - sum(spent.values()) * 1000 / runs:6.3f} ms")


async def _apart(agents: list[str], s: session.Session, runs: int) -> None:
    """`runs` pairs of quiet whispers one at a time: step 4's reads in one statement, and each on its own."""
    together = getattr(cycle, "_read_ledgers", None)
    if together is None:  # a base checkout from before the reads were one statement (--code)
        return

    async def apart(*args: Any, **kwargs: Any) -> None:
        return None  # as when the statement failed: each read is made where it is used

    spent: dict[bool, list[float]] = {False: [], True: []}
    try:
        for i in range(runs * 2):
            one_statement = (i // 2) % 2 == i % 2  # ABBA, so a drift of the load falls on both alike
            cycle._read_ledgers = together if one_statement else apart
            t0 = time.process_time()
            await _one(s, agents[(i // 2) % len(agents)])
            spent[one_statement].append((time.process_time() - t0) * 1000)
    finally:
        cycle._read_ledgers = together
    a, b = statistics.mean(spent[True]), statistics.mean(spent[False])
    print(f"\nstep 4's reads, {runs} whispers each way one at a time: this process's CPU {a:.2f} ms per whisper in one statement, "
          f"{b:.2f} ms each on its own ({b - a:+.2f} ms)")


async def main(args: argparse.Namespace, state_dir: Path) -> None:
    logs.configure("json", "error", stream=sys.stderr)
    with ScriptedServer() as server, counted_pools():
        config = _config(state_dir, args.agents, server.url)
        async with session.open_session(config, neo4j=False) as s:
            agents = list(config.agents)
            for agent in agents:  # warm: statement caches, the fence rows, a previous wake per agent
                await _one(s, agent)
                await _one(s, agent)
            # An agent's whispers are minutes apart in production, so its memory's work tree has been
            # still for longer than the stamp's racy window (memory.stamp.RACY_NS) and a quiet wake
            # trusts the stamp instead of asking git for the status. The warm-up has just written
            # every tree: wait the window out, or the first whispers timed ask git.
            await asyncio.sleep(RACY_NS / 1e9 + 0.5)
            for label, mode in (("unscoped (baseline)", _unscoped), ("scoped", contextlib.nullcontext)):
                with mode():
                    await _one(s, agents[0])  # warm this mode's pool
                    before = CountingConnection.totals()
                    redis_before = await _redis_calls(s)
                    await _one(s, agents[0])
                    redis_after = await _redis_calls(s)
                    after = CountingConnection.totals()
                trips, commits = after[0] - before[0], after[1] - before[1]
                redis_trips = redis_after - redis_before - 1  # the INFO itself
                print(f"one quiet whisper (the default sources), {label}: PostgreSQL round trips {trips}, commits {commits}, "
                      f"Redis round trips {redis_trips}")

            _stop_counting()
            _TIMINGS.clear()
            durations: dict[bool, list[float]] = {False: [], True: []}
            cpu_started = time.process_time()
            for i in range(args.wakes * 2):
                scoped = i % 2 == 1
                with contextlib.nullcontext() if scoped else _unscoped():
                    durations[scoped].append(await _one(s, agents[(i // 2) % len(agents)]))
            cpu_ms = (time.process_time() - cpu_started) * 1000 / (args.wakes * 2)
            for scoped, label in ((False, "unscoped (baseline)"), (True, "scoped")):
                p50, p99 = statistics.median(durations[scoped]), _pct(durations[scoped], 0.99)
                print(f"daemon-path whisper, one at a time, {args.wakes} wakes, {label}: p50 {p50:.2f} ms  p99 {p99:.2f} ms")
            print(f"  the same wakes: {_claims(_TIMINGS)}; this process's CPU {cpu_ms:.2f} ms per whisper")
            print(f"  a quiet wake's memory work (open, audit, list), in process: {_memory_work(config, agents[0], args.wakes)}")
            print(f"  the floor, {trips} PostgreSQL round trips ({commits} commits) and 2 Redis, one connection: "
                  f"{await _floor(s, args.wakes, trips, commits)}")
            _TIMINGS.clear()

            rounds = max(1, args.wakes // len(agents))
            # One round untimed first: the pool grows to `--agents` connections, each new one with
            # its statement cache cold, as a running daemon's pool is not (the one-at-a-time
            # whispers above used one or two).
            await asyncio.gather(*(_one(s, agent) for agent in agents))
            _TIMINGS.clear()
            started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(rounds):
                await asyncio.gather(*(_one(s, agent) for agent in agents))
            elapsed = time.perf_counter() - started
            cpu_ms = (time.process_time() - cpu_started) * 1000 / (rounds * len(agents))
            print(f"wakes per second on one loop, {len(agents)} at once: {rounds * len(agents) / elapsed:.1f}")
            print(f"  the same wakes: {_claims(_TIMINGS)}; this process's CPU {cpu_ms:.2f} ms per wake")
            print(f"the same Python in 10 parts (the machine's cost of sleeping, not the wake's): {await _sleep_tax(s, args.wakes * 2)}")
            if args.profile:
                await _profile(agents, s, args.profile)
            if args.steps:
                await _steps(agents, s, args.steps)
            if args.apart:
                await _apart(agents, s, args.apart)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _run(args: argparse.Namespace, state_dir: Path) -> None:
    """`main` on each event loop of `--loop` in turn, the same stores and agents."""
    for event_loop in args.loop.split(","):
        print(f"\n== the event loop: {event_loop}" + (" (the daemon's default)" if event_loop == DAEMON_LOOP else ""))
        factory = app.loop_factory(event_loop) if app is not None else None
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(main(args, state_dir))
        _count_again()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--wakes", type=int, default=200)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="profile 200 more whispers; print the top N functions")
    parser.add_argument("--steps", type=int, default=0, metavar="N", help="time N more whispers' CPU step by step")
    parser.add_argument("--apart", type=int, default=0, metavar="N",
                        help="N more pairs of whispers: step 4's reads in one statement against each on its own")
    parser.add_argument("--code", help="the checkout whose wake runs (default: this one)")
    parser.add_argument("--loop", default=f"{DAEMON_LOOP},asyncio" if DAEMON_LOOP != "asyncio" else "asyncio",
                        help="event loops to run the whole bench on, in turn, comma-separated (default: the daemon's, then asyncio's)")
    args = parser.parse_args()
    if args.state_dir:
        args.state_dir.mkdir(parents=True, exist_ok=True)
        _run(args, args.state_dir.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
            try:
                _run(args, Path(tmp))
            finally:
                with contextlib.suppress(Exception):  # before the directory goes: nothing outlives the run
                    engines.stop(Path(tmp), force=True)
