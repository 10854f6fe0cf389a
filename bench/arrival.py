"""Arrival benchmark on the real embedded PostgreSQL. Prints figures; it is not a timed test.

    python bench/arrival.py [--wakes 200] [--state-dir DIR]

1. Ten sources, each a `pg_sleep` of a different length on its own pooled connection, run as one
   arrival: wall time / the slowest healthy source's own time (target <= 1.15), and the speed-up
   over running the same sources one after another.
2. The same plus one hung source (`pg_sleep(30)`): wall time against the source timeout
   (target <= timeout + 20 ms).
3. The harness overhead of a whole `wake up` without a model, in process: p50, p99, wakes/s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from surfaces import loader  # noqa: E402
from wake import config as wake_config
from wake import (
    logs,
    stores,  # noqa: E402
)
from wake.arrival import engine as arrival
from wake.run import session

SLEEPS_MS = (20, 30, 40, 50, 60, 70, 80, 90, 100, 120)
TIMEOUT_MS = 400
REPEATS = 5


def _pg_source(name: str, sleep_ms: int) -> arrival.Source:
    async def fn(ctx: Any) -> arrival.Found:
        async with ctx.stores.pg_conn() as conn:
            await conn.execute("SELECT pg_sleep($1)", sleep_ms / 1000)
        return arrival.Found(text=f"{name} slept {sleep_ms} ms", rows=1)

    return arrival.Source(name=name, cache_tier=arrival.CacheTier.session, fn=fn)


class _Ctx:
    def __init__(self, st: stores.Stores) -> None:
        self.stores = st


async def _assemble(sources: list[arrival.Source], ctx: Any) -> tuple[float, list[arrival.Block]]:
    started = time.perf_counter()
    blocks = await arrival.assemble(sources, ctx, TIMEOUT_MS / 1000, with_earlier=lambda c, e: c)
    return (time.perf_counter() - started) * 1000, blocks


async def main(wakes: int, state_dir: Path) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    path = state_dir / "wake.toml"
    default = wake_config.EMBEDDED_DEFAULT
    path.write_text(
        default.read_text().replace("[log]", f'state_dir = "{state_dir}"\n[postgres]\npool_max_size = 16\n\n[log]', 1)
        .replace('persona_files = ["agents/demo/persona.md"]', f'persona_files = ["{default.parent / "agents/demo/persona.md"}"]')
    )
    config = wake_config.load_config_file(path, environ={})
    async with session.open_session(config, neo4j=False) as s:
        ctx = _Ctx(s.stores)
        healthy = [_pg_source(f"sleep_{ms}", ms) for ms in SLEEPS_MS]
        await _assemble(healthy, ctx)  # warm the pool
        ratios, speedups = [], []
        for _ in range(REPEATS):
            wall, blocks = await _assemble(healthy, ctx)
            slowest = max(b.latency_ms for b in blocks)
            sequential = 0.0
            for source in healthy:
                t, _ = await _assemble([source], ctx)
                sequential += t
            ratios.append(wall / slowest)
            speedups.append(sequential / wall)
        print(f"arrival, 10 pg_sleep sources ({min(SLEEPS_MS)}-{max(SLEEPS_MS)} ms), {REPEATS} runs:")
        print(f"  wall / slowest healthy source     median {statistics.median(ratios):.3f}  max {max(ratios):.3f}  (target <= 1.15)")
        print(f"  speed-up over sequential          median {statistics.median(speedups):.2f}x")

        hung = _pg_source("hung", 30_000)
        overshoots = []
        for _ in range(REPEATS):
            wall, blocks = await _assemble([*healthy, hung], ctx)
            assert next(b for b in blocks if b.name == "hung").reason == "timeout"
            overshoots.append(wall - TIMEOUT_MS)
        print(
            f"  with one hung source, timeout {TIMEOUT_MS} ms: wall = timeout + median {statistics.median(overshoots):.1f} ms, "
            f"max {max(overshoots):.1f} ms  (target <= +20 ms)"
        )

        registry = loader.build()
        durations = []
        started = time.perf_counter()
        for _ in range(wakes):
            t0 = time.perf_counter()
            outcome = await wakes.run(config, s.stores, registry, agent_id="demo", tier="whisper")
            durations.append((time.perf_counter() - t0) * 1000)
            assert outcome.status == "completed", outcome.error
        total_s = time.perf_counter() - started
        durations.sort()
        p99 = durations[min(len(durations) - 1, int(len(durations) * 0.99))]
        print(f"whole `wake up` (whisper, built-in sources, no model), {wakes} wakes in process:")
        print(f"  p50 {statistics.median(durations):.2f} ms  p99 {p99:.2f} ms  {wakes / total_s:.1f} wakes/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wakes", type=int, default=200)
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        asyncio.run(main(args.wakes, args.state_dir or Path(tmp)))
