"""A signal reaches the loop even when a thread has filled the loop's self-pipe (wake.daemon.signals).

A replica that took many agents over adds as many APScheduler jobs, and the scheduler wakes the loop
once for each (`call_soon_threadsafe`, one byte in the self-pipe each). asyncio's own
`add_signal_handler` learns of a signal from one more byte in that pipe, dropped when it is full:
the replica then never stopped on SIGTERM. Each case runs in a child process, since it signals
itself; the child floods the pipe from a thread while the loop is held, then signals itself.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys, threading
    from wake.daemon import signals

    FLOOD = 20_000  # a self-pipe holds a few hundred one-byte wake-ups

    async def main(mode: str, signum: int) -> None:
        loop = asyncio.get_running_loop()
        got: list[int] = []
        arrived = asyncio.Event()

        def on_signal(sig: int) -> None:
            got.append(sig)
            arrived.set()

        installed = None
        if mode == "asyncio":
            loop.add_signal_handler(signum, on_signal, signum)
        else:
            installed = signals.install(loop, {signum: on_signal})
        # the loop is held here while a thread wakes it FLOOD times, as APScheduler does per job added
        flood = threading.Thread(target=lambda: [loop.call_soon_threadsafe(lambda: None) for _ in range(FLOOD)])
        flood.start()
        flood.join()
        os.kill(os.getpid(), signum)
        # the pipe is drained within the first turns of the loop; a handled signal has come by then
        try:
            await asyncio.wait_for(arrived.wait(), timeout=float(sys.argv[3]))
        except TimeoutError:
            pass
        if installed is not None:
            installed.remove()
            # what was there before is back: the default action of the signal
            print("restored", signal.getsignal(signum) == signal.SIG_DFL)
        print("handled", got)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


def _child(mode: str, signum: int, wait_s: float) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(signum), str(wait_s)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_is_handled_once_after_a_flood_of_wakeups(signum: int) -> None:
    lines = _child("wake", signum, wait_s=60.0)
    assert lines == ["restored True", f"handled [{int(signum)}]"]


def test_the_flood_is_real_asyncio_alone_drops_the_signal() -> None:
    """Without this the test above could pass on a flood too small to fill the pipe. The drop shows
    within a few turns of the loop; the 5 s wait is only the bound on saying it never came."""
    assert _child("asyncio", signal.SIGTERM, wait_s=5.0) == ["handled []"]
