"""Load for a test run: busy loops on N processes, bounded in time, gone when their parent is.

    python -m tests.support.cpu_hog --procs 4 --seconds 1800 -- python -m pytest
    python -m tests.support.cpu_hog --procs 4 --seconds 600 &     # alone, in the background

With a command after `--`, the loops run while the command does and the hog exits with the
command's status; the loops stop at `--seconds` even if the command goes on. Alone, the loops run
for `--seconds`. Either way they stop when the process that started the hog dies, and on SIGTERM
or SIGINT. Every loop checks its deadline and its parent about ten times a second, so nothing
outlives the run by more than that. docs/testing.md says how to use it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

MAX_SECONDS = 4 * 3600  # the hog never runs longer than this, whatever it is asked
CHECK_EVERY_S = 0.1


def _burn(deadline: float, parent: int) -> None:
    """One busy loop: spin until the deadline or until `parent` (the hog) is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C goes to the hog, which stops the loops
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    spins = 1
    while time.monotonic() < deadline and os.getppid() == parent:
        started = time.monotonic()
        for _ in range(spins):
            pass
        # keep each spin near CHECK_EVERY_S, so the checks stay frequent on a fast or a loaded core
        spins = max(1, int(spins * CHECK_EVERY_S / max(time.monotonic() - started, 1e-4)))


def _stop(workers: Sequence[multiprocessing.Process]) -> None:
    for w in workers:
        if w.is_alive():
            w.terminate()
    for w in workers:
        w.join(timeout=10)
        if w.is_alive():
            w.kill()
            w.join(timeout=10)


def run(procs: int, seconds: float, command: Sequence[str]) -> int:
    """Start the loops, then run `command` (or wait out `seconds`); returns the exit status."""
    seconds = min(seconds, MAX_SECONDS)
    deadline = time.monotonic() + seconds
    starter = os.getppid()
    workers = [multiprocessing.Process(target=_burn, args=(deadline, os.getpid()), daemon=True, name=f"cpu_hog-{n}") for n in range(procs)]
    stopping: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signal.Signals(signum).name)

    for w in workers:
        w.start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"cpu_hog: {procs} busy loop(s) for at most {seconds:g} s (pid {os.getpid()})", file=sys.stderr, flush=True)
    began = time.monotonic()
    child = subprocess.Popen(command) if command else None
    status = 0
    reason = "time is up"
    announced = False
    while True:
        if child is not None and child.poll() is not None:
            status, reason = child.returncode, "the command ended"
            break
        if stopping:
            reason = f"got {stopping[0]}"
            status = 128 + signal.Signals[stopping[0]].value
            break
        if os.getppid() != starter:
            reason = "the process that started it is gone"
            break
        if child is None and time.monotonic() >= deadline:
            break
        if child is not None and not announced and time.monotonic() >= deadline:
            print(f"cpu_hog: loops stopped at {seconds:g} s; the command goes on", file=sys.stderr, flush=True)
            announced = True
        time.sleep(CHECK_EVERY_S)
    _stop(workers)
    if child is not None and child.poll() is None:
        child.terminate()
        status = child.wait()
    print(f"cpu_hog: stopped after {time.monotonic() - began:.1f} s: {reason}", file=sys.stderr, flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, command = args[:at], args[at + 1:]
    parser = argparse.ArgumentParser(prog="python -m tests.support.cpu_hog", description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 2, help="busy loops (default: one per core)")
    parser.add_argument("--seconds", type=float, default=1800, help=f"the longest the loops run (default 1800, at most {MAX_SECONDS})")
    opts = parser.parse_args(args)
    if opts.procs < 1 or opts.seconds <= 0:
        parser.error("--procs and --seconds must be positive")
    return run(opts.procs, opts.seconds, command)


if __name__ == "__main__":
    sys.exit(main())
