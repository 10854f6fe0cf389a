"""What the test servers (Neo4j, llama.cpp) and the daemon tests share: a free loopback port, and a
child process that dies with the test process."""

from __future__ import annotations

import signal
import socket


def die_with_parent() -> None:
    """preexec_fn (Linux): SIGTERM the child if the Python process that started it dies."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
