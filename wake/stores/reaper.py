"""The reaper of a state directory's lingering engines: `python -m wake.stores.reaper STATE IDLE_S`.

Started (detached) by the first wake process that uses the embedded engines with
`engines.idle_s` > 0; one per state directory (it holds `<state>/.reaper.lock` for its life, and
a second one exits at once). Every poll it counts the live processes registered with either
engine, so a process killed with SIGKILL stops counting as soon as it is dead. When none has been
live for IDLE_S it stops both engines and exits; it exits too when the engines are gone (`wake
engines stop`), and when the state directory itself was deleted, or deleted and made again (its
path now names another directory), it stops the engines it saw there.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import fasteners

from wake.errors import EnginesBusy
from wake.stores import engines

POLL_S = 1.0


def reap(state_dir: Path, idle_s: float, *, poll_s: float = POLL_S) -> str:
    """Run until the engines stop; returns why it stopped."""
    lock = fasteners.InterProcessLock(str(state_dir / engines.REAPER_LOCK))
    if not lock.acquire(blocking=False):
        return "another reaper runs"
    poll_s = max(0.05, min(poll_s, idle_s / 4))
    watched = _identity(state_dir)
    seen = engines.engine_pids(state_dir)
    last_used = time.monotonic()
    try:
        while True:
            if _identity(state_dir) != watched:  # deleted, or another directory at its path: its engines' files went with it
                engines.kill_engines(seen, gone=True)
                return "state directory deleted"
            now = engines.engine_pids(state_dir)
            seen = now or seen
            if not now:
                return "engines gone"
            if engines.users(state_dir):
                last_used = time.monotonic()
            elif time.monotonic() - last_used >= idle_s:
                try:
                    engines.stop(state_dir)
                    return "idle"
                except EnginesBusy:  # someone joined just now
                    last_used = time.monotonic()
            time.sleep(poll_s)
    finally:
        lock.release()


def _identity(path: Path) -> tuple[int, int] | None:
    """The directory at `path` (device and inode), or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def main(argv: list[str]) -> int:
    state_dir, idle_s = Path(argv[0]), float(argv[1])
    reap(state_dir, idle_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
