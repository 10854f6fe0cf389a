"""CLI start-up benchmark: how long a one-shot command takes to begin, next to its floor. Prints figures; not a test.

    python bench/cli.py [--runs 7] [--state-dir DIR] [--no-wake-up]

Each figure is the median (and the spread) of `--runs` fresh interpreters, measured in this run
beside the floor it cannot go under, so the ratio holds on a noisy machine:

1. `python -c pass`: the interpreter alone.
2. The libraries every command needs before it does anything: click (the command line), pydantic
   (the config is validated before any command runs), structlog (the log lines); and the store
   clients most commands open (asyncpg, redis).
3. `import wake.cli.main`: the whole command line, every command registered.
4. `wake --help`: start-up and click's rendering.
5. Two `wake up` in a row on the embedded default (the demo agent, a fresh state directory): the
   first pays initdb; the second finds the engines still up (`engines.idle_s`) and pays for the
   wake alone. `wake engines stop` ends them afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAKE = Path(sys.executable).parent / "wake"  # the console script of this environment


def _env(**extra: str) -> dict[str, str]:
    """The environment of every measured process: this checkout's code first on the path (the
    console script of an editable install would otherwise import the tree it was installed from)."""
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, env=env or _env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _row(label: str, samples: list[float]) -> str:
    return f"{label:<44} {statistics.median(samples) * 1000:8.0f} ms   (min {min(samples) * 1000:.0f}, max {max(samples) * 1000:.0f})"


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--no-wake-up", action="store_true", help="skip the two `wake up` runs (they start PostgreSQL and Redis)")
    args = parser.parse_args()
    print(f"load average before: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    cases = [
        ("python -c pass (the interpreter)", _python("pass")),
        ("import click, pydantic, structlog (floor)", _python("import click, pydantic, structlog")),
        ("  + asyncpg, redis.asyncio", _python("import click, pydantic, structlog, asyncpg, redis.asyncio")),
        ("import wake.cli.main (every command)", _python("import wake.cli.main")),
        ("wake --help", [str(WAKE), "--help"]),
    ]
    for label, argv in cases:
        samples = [_timed(argv) for _ in range(args.runs)]
        print(_row(label, samples), flush=True)
    if not args.no_wake_up:
        with tempfile.TemporaryDirectory(prefix="wake-bench-cli-") as tmp:
            state = args.state_dir or Path(tmp) / "state"
            env = _env(WAKE_STATE_DIR=str(state))
            wake = [str(WAKE)]
            try:
                first = _timed([*wake, "up"], env)
                second = _timed([*wake, "up"], env)
                third = _timed([*wake, "up"], env)
            finally:
                subprocess.run([*wake, "engines", "stop"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"{'wake up, first (initdb, engines start)':<44} {first * 1000:8.0f} ms")
            print(f"{'wake up, second and third (engines warm)':<44} {second * 1000:8.0f} ms, {third * 1000:.0f} ms")
    print(f"load average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
