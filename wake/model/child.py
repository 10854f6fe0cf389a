"""A server this process started as its child: the embedded model's llama-server, and the test
tooling's Neo4j and Jaeger. What they share is how one stops: `stop()` (also at the process's
exit, once `start` registered it), or the end of a `with` block."""

from __future__ import annotations

import atexit
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """preexec_fn (Linux): SIGTERM the child if the thread that started it dies."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ChildServer:
    """The child's process (`_proc`, set by the subclass's `start`) and its stop."""

    stop_timeout_s: float = 30
    log_path: Path  # where the child's output goes (the subclass sets it)

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None

    def _spawn(self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        """Start `cmd` in a session of its own, its output appended to `log_path`, stopped at this
        process's exit; from the main thread on Linux it also dies with this process (the death
        signal follows the starting thread)."""
        on_main = threading.current_thread() is threading.main_thread() and sys.platform == "linux"
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(  # noqa: PLW1509 (main thread only)
                list(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                preexec_fn=die_with_parent if on_main else None,
            )
        atexit.register(self.stop)

    def start(self) -> Self:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM, then SIGKILL after `timeout_s` (the class's `stop_timeout_s` unless given)."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(self.stop_timeout_s if timeout_s is None else timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
