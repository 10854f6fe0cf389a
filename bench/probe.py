"""What the dual-needle controls cost a claim probe. Prints figures; it is not a timed test.

    python bench/probe.py [--runs 200] [--size-kb 256]

Per probe, p50 and p99 of: the bare evaluation (no controls), the fixture self-test alone, and a
whole probe (fixture controls + paired runs on the target + the probe), for `exists` and for
`contains` on a file of --size-kb.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from surfaces import probe  # noqa: E402


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--size-kb", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        line = b"lorem ipsum dolor sit amet, absent consectetur\n"
        (root / "big.txt").write_bytes(line * (args.size_kb * 1024 // len(line)) + b"NEEDLE\n")
        inst = probe.Instrument.create([root])
        exists = probe.ProbeSpec(target="big.txt", mode="exists")
        contains = probe.ProbeSpec(target="big.txt", mode="contains", needle="NEEDLE")
        path = probe.resolve("big.txt", inst.roots)
        rows = [
            ("bare evaluate, exists", lambda: probe.evaluate(path, exists, inst.max_file_bytes)),
            (f"bare evaluate, contains ({args.size_kb} KiB)", lambda: probe.evaluate(path, contains, inst.max_file_bytes)),
            ("fixture self-test alone", inst.self_test),
            ("whole probe, exists", lambda: inst.probe(exists)),
            (f"whole probe, contains ({args.size_kb} KiB)", lambda: inst.probe(contains)),
        ]
        print(f"{'what':<40} {'p50 ms':>8} {'p99 ms':>8}   ({args.runs} runs)")
        for name, fn in rows:
            p50, p99 = timed(fn, args.runs)
            print(f"{name:<40} {p50:8.3f} {p99:8.3f}")
        assert inst.probe(contains).verdict == "verified"


if __name__ == "__main__":
    main()
