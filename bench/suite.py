"""The suite's wall time, serial and on workers, in one run. Prints figures; not a test.

    python bench/suite.py [--modes serial,parallel] [--workers auto] [-- PYTEST ARGS]

Runs README's test command (`python -m pytest`) on this checkout once per mode, back to back, so
both figures meet the same machine: `serial` is `-n 0` (one process: how the suite ran before
pytest-xdist), `parallel` is `-n WORKERS` (the default, `auto`: one worker per core). Each run
gets its own temporary directory (`--basetemp`; the suite makes its state and XDG homes there),
and the environment `.ci/run` gives it (the real Neo4j, llama.cpp and Chromium required, the replica run at 60 s, bytecode
written); nothing is read from the caller's `WAKE_*`, `PG*`, `REDIS_URL` or `XDG_*`. This tree's
code is first on the path, so a clone measures itself and not the editable install.

Per mode: wall time, the CPU time of pytest and every child it waited for (user + system), the
CPU time the whole machine was busy (which also counts the engines pg_ctl daemonized, and anything
else running), the outcome counts pytest printed, and the load average before and after. Run it on a clean clone
(`git clone . /tmp/w && cd /tmp/w && python bench/suite.py`) with the engines' caches warm
(`.ci/run` fetches them), on a machine doing nothing else: it takes as long as the two suites.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
HERMETIC = ("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "XDG_", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTEST_")
CI_ENV = {"WAKE_REQUIRE_NEO4J": "1", "WAKE_REQUIRE_LLAMA": "1", "WAKE_REQUIRE_CHROMIUM": "1", "WAKE_TEST_REPLICA_RUN_S": "60"}
SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+) in [\d.]+s", re.MULTILINE)  # "1302 passed, 1 skipped in 9.1s"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (every core, every process): the suite's engines
    (PostgreSQL started by pg_ctl, reparented away from pytest) are counted here and not in
    `children_cpu`. On a machine doing nothing else it is the suite's CPU."""
    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "steal", 0.0))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(mode: str, workers: str, extra: list[str], scratch: Path) -> dict[str, str]:
    home = scratch / mode
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(HERMETIC)}
    env.update(CI_ENV, PYTHONPATH=str(ROOT))  # the suite puts its environment's scripts first on PATH (tests/support/environ.py)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={home / 'tmp'}",
            "-n", "0" if mode == "serial" else workers, *extra]
    before_load, cpu0, busy0, t0 = load(), children_cpu(), machine_busy(), time.monotonic()
    done = subprocess.run(args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    wall, cpu, busy = time.monotonic() - t0, children_cpu() - cpu0, machine_busy() - busy0
    (scratch / f"{mode}.log").write_text(done.stdout + done.stderr)
    found = [m.group("body") for m in SUMMARY.finditer(done.stdout)]
    return {
        "mode": mode if mode == "serial" else f"parallel (-n {workers})",
        "wall": f"{int(wall // 60)} min {wall % 60:04.1f} s",
        "cpu": f"{cpu / 60:.1f} CPU-min",
        "busy": f"{busy / 60:.1f} CPU-min ({100 * busy / (wall * (os.cpu_count() or 1)):.0f}% of the cores)",
        "outcome": found[-1] if found else f"exit {done.returncode}, no summary (see {scratch / (mode + '.log')})",
        "load": f"{before_load} -> {load()}",
        "exit": str(done.returncode),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="serial,parallel", help="comma-separated, in order: serial, parallel")
    parser.add_argument("--workers", default="auto", help="pytest-xdist's -n for the parallel run")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    opts = parser.parse_args()
    modes = [m.strip() for m in opts.modes.split(",") if m.strip()]
    if not modes or any(m not in {"serial", "parallel"} for m in modes):
        parser.error(f"--modes takes serial and parallel, got {opts.modes[:80]!r}")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"suite of {ROOT} at {head or '?'} on {os.cpu_count()} cores; load average (1, 5, 15 min) {load()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="wake-bench-suite-") as scratch:
        for mode in modes:
            rows.append(run(mode, opts.workers, opts.pytest_args, Path(scratch)))
            r = rows[-1]
            print(f"  {r['mode']:<18} {r['wall']:>14}  pytest and its children {r['cpu']}, the machine {r['busy']}"
                  f"  load {r['load']}  {r['outcome']}", flush=True)
            if r["exit"] != "0":
                print("    (its log: " + (Path(scratch) / f"{mode}.log").read_text()[-2000:].replace("\n", "\n    ") + ")")
    if len(rows) == 2:
        print(f"serial -> parallel: {rows[0]['wall']} -> {rows[1]['wall']}")


if __name__ == "__main__":
    main()
