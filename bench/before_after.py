"""The wake and scheduler benchmarks, before and after, in one run: the base commit's code (checked
out in a temporary `git worktree`) and this checkout's, each run by the same benchmark scripts
(`--code`), alternating (before, after; then after, before; ...) so a drift of the machine's load
falls on both alike. Prints each run's figures with the load average at its end, then the median of
each figure over the rounds. Prints figures; it is not a timed test.

    python bench/before_after.py [--base REV] [--rounds 2] [--wakes 200] [--agents 1000] [--duration-s 40]
                                 [--no-scheduler] [--no-wake]

`--base` defaults to the merge base of HEAD and `main`.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

FIGURES = {  # label -> (script, pattern of the line's number)
    "whisper p50, one at a time (ms)": ("wake", r"one at a time, \d+ wakes, scoped: p50 ([\d.]+)"),
    "whisper p99, one at a time (ms)": ("wake", r"one at a time, \d+ wakes, scoped: p50 [\d.]+ ms  p99 ([\d.]+)"),
    "CPU of this process per whisper (ms)": ("wake", r"this process's CPU ([\d.]+) ms per whisper"),
    "a quiet wake's memory work, in process, p50 (ms)": ("wake", r"memory work \(open, audit, list\), in process: p50 ([\d.]+)"),
    "store floor of a whisper, p50 (ms)": ("wake", r"the floor, .*?: p50 ([\d.]+)"),
    "claim p50, one at a time (ms)": ("wake", r"(?s)one at a time.*?the same wakes: claim p50 ([\d.]+)"),
    "wakes per second, 16 at once on one loop": ("wake", r"wakes per second on one loop, \d+ at once: ([\d.]+)"),
    "CPU of this process per wake, 16 at once (ms)": ("wake", r"this process's CPU ([\d.]+) ms per wake"),
    "claim p50, 16 at once on one loop (ms)": ("wake", r"(?s)wakes per second on one loop.*?the same wakes: claim p50 ([\d.]+)"),
    "lease+claim+release p50, 16 at once (ms)": ("wake", r"(?s)wakes per second on one loop.*?lease\+claim\+release p50 ([\d.]+)"),
    "scheduler: claim p50 (ms)": ("scheduler", r"of which claim\s+p50\s+([\d.]+)"),
    "scheduler: lease+claim p50 per wake (ms)": ("scheduler", r"lease\+claim overhead\s+p50\s+([\d.]+)"),
    "scheduler: wakes per second": ("scheduler", r"wakes per second\s+([\d.]+)"),
    "scheduler: lock waits per sample": ("scheduler", r"lock waits per sample ([\d.]+)"),
    "scheduler: backends idle in a transaction per sample": ("scheduler", r"([\d.]+)\s+Client:ClientRead \(idle in transaction\)"),
}


def run(script: str, code: Path, args: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        [sys.executable, str(HERE / "bench" / f"{script}.py"), "--code", str(code), *args],
        capture_output=True, text=True, env=env, check=False, timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench/{script}.py --code {code} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=None, help="the commit to compare against (default: the merge base with main)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wakes", type=int, default=200)
    parser.add_argument("--agents", default="1000")
    parser.add_argument("--duration-s", default="40")
    parser.add_argument("--no-scheduler", action="store_true")
    parser.add_argument("--no-wake", action="store_true")
    args = parser.parse_args()
    git = ["git", "-C", str(HERE)]
    base = args.base or subprocess.run([*git, "merge-base", "HEAD", "main"], capture_output=True, text=True, check=True).stdout.strip()
    base_short = subprocess.run([*git, "rev-parse", "--short", base], capture_output=True, text=True, check=True).stdout.strip()
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    dirty = " (with uncommitted changes)" if subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True).stdout else ""
    scripts = {} if args.no_wake else {"wake": ["--wakes", str(args.wakes)]}
    if not args.no_scheduler:
        scripts["scheduler"] = ["--agents", args.agents, "--jitter-s", "10", "--duration-s", args.duration_s, "--no-bare"]
    with tempfile.TemporaryDirectory(prefix="wake-before-") as tmp:
        before = Path(tmp) / "base"
        subprocess.run([*git, "worktree", "add", "--detach", "-q", str(before), base], check=True)
        try:
            found: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
            for n in range(args.rounds):
                order = [("before", before), ("after", HERE)]
                for label, code in order if n % 2 == 0 else order[::-1]:
                    for script, script_args in scripts.items():
                        out = run(script, code, script_args)
                        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                        print(f"--- round {n + 1}, {label} ({base_short if label == 'before' else head + dirty}), bench/{script}.py, "
                              f"load average {load}\n{out}", flush=True)
                        for figure, (which, pattern) in FIGURES.items():
                            match = re.search(pattern, out) if which == script else None
                            if match:
                                found[label].setdefault(figure, []).append(float(match.group(1)))
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(before)], check=False)
    print(f"\nmedian of {args.rounds} rounds            before ({base_short})   after ({head}{dirty})")
    for figure in FIGURES:
        b, a = found["before"].get(figure), found["after"].get(figure)
        if b or a:
            print(f"{figure:52s} {statistics.median(b) if b else float('nan'):12.2f} {statistics.median(a) if a else float('nan'):12.2f}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
