"""What tracing costs a quiet whisper (docs/traces.md). Prints figures; not a timed test.

    python bench/tracing.py [--wakes 200] [--otlp-endpoint http://127.0.0.1:4318]

Quiet whispers on the daemon's path (`wake.run.claim`: slot claim, lease and fence, the default
sources, manifest, row, the gate settling it `quiet` without a model call, release) on the
embedded stores, alternating in the same run between tracing off (no tracer: every span is the
module's no-op) and on (the SDK's tracer provider and batch processor, the spans of the claim, the
lease, the binding, each source and the manifest under the wake's). On, the spans go to the SDK's
in-memory exporter by default, so the figure is making and batching them, not a network; with
`--otlp-endpoint` they are exported over OTLP/HTTP to that collector (a Jaeger: `python -m
tests.support.jaeger_server run --workdir DIR` prints its endpoint), whose export thread's CPU is
this process's too. Figures: this process's CPU per whisper (all threads, `time.process_time`) and
the wall p50/p99, off and on.
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
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from tests.support.openai_server import ScriptedServer  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake import logs  # noqa: E402
from wake.context import WakeRequest  # noqa: E402
from wake.observe import tracing  # noqa: E402
from wake.run import claim, session  # noqa: E402
from wake.stores import engines  # noqa: E402

_SLOT = [dt.datetime(2020, 1, 1, tzinfo=dt.UTC)]


def _config(state_dir: Path, url: str) -> wake_config.Config:
    path = state_dir / "wake.toml"
    path.write_text(
        f'state_dir = "{state_dir}"\n[models.scripted]\nbase_url = "{url}"\nmodel = "scripted-1"\n'
        '[agents.a]\ntimezone = "UTC"\n[agents.a.tiers.whisper]\nevery = "30s"\nbinds = ["wake.whisper"]\nmodel = "scripted"\n'
    )
    return wake_config.load_config_file(path, environ={})


async def _one(s: session.Session) -> tuple[float, float]:
    """One scheduled whisper: (wall ms, CPU ms)."""
    _SLOT[0] += dt.timedelta(seconds=30)
    request = WakeRequest(agent_id="a", tier="whisper", trigger="schedule", scheduled_for=_SLOT[0], wake_id=uuid.uuid4())
    t0, c0 = time.perf_counter(), time.process_time()
    async with claim.started(s, request, claim.Claim(by="bench"), owner=claim.owner()) as wake:
        assert wake is not None
        outcome = await claim.ran(s, wake)
    assert outcome.status in ("completed", "quiet"), outcome
    return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace, state_dir: Path) -> None:
    logs.configure("json", "error", stream=sys.stderr)
    memory = None
    if args.otlp_endpoint:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = args.otlp_endpoint
        os.environ.setdefault("OTEL_SERVICE_NAME", "wake-bench")
        assert tracing.configure()
        where = f"exported over OTLP/HTTP to {args.otlp_endpoint}"
    else:
        memory = InMemorySpanExporter()
        tracing.configure({}, exporter=memory)
        where = "the SDK's in-memory exporter"
    on = tracing._tracer
    with ScriptedServer() as server:
        config = _config(state_dir, server.url)
        async with session.open_session(config, neo4j=False) as s:
            for _ in range(3):  # warm: statement caches, the fence row, a previous wake (the first whisper calls the model)
                await _one(s)
            took: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for i in range(args.wakes * 2):
                traced = i % 2 == 1  # alternating: a drift of the machine's load falls on both alike
                tracing._tracer = on if traced else None
                took[traced].append(await _one(s))
            tracing._tracer = on
    tracing.flush()
    spans = len(memory.get_finished_spans()) if memory is not None else None
    tracing.shutdown()
    print(f"quiet whisper, daemon path, {args.wakes} wakes each, alternating in one run; on: {where}")
    for traced in (False, True):
        wall, cpu = [w for w, _ in took[traced]], [c for _, c in took[traced]]
        label = "tracing on " if traced else "tracing off"
        print(f"  {label}: CPU {statistics.mean(cpu):.2f} ms per whisper (p50 {statistics.median(cpu):.2f}), "
              f"wall p50 {statistics.median(wall):.2f} ms  p99 {_pct(wall, 0.99):.2f} ms")
    off_cpu, on_cpu = statistics.mean(c for _, c in took[False]), statistics.mean(c for _, c in took[True])
    print(f"  tracing's CPU: {on_cpu - off_cpu:+.2f} ms per whisper ({(on_cpu - off_cpu) / off_cpu * 100:+.1f}%)")
    if spans is not None:
        print(f"  spans exported: {spans} ({spans / (args.wakes + 3):.1f} per whisper, the warm-up's included)")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wakes", type=int, default=200)
    parser.add_argument("--otlp-endpoint", help="export to this OTLP/HTTP collector instead of the in-memory exporter")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        try:
            asyncio.run(main(args, Path(tmp)))
        finally:
            with contextlib.suppress(Exception):  # before the directory goes: nothing outlives the run
                engines.stop(Path(tmp), force=True)
