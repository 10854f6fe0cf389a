"""A child process that builds fingerprints, so that parsing never holds the daemon's GIL.

The child is started with a bootstrap that reads, on stdin, one JSON line (the parent's
`sys.path`, so it imports the same code) and then calls `main`, which reads requests framed as
an 8-byte big-endian length and a pickle of `(builder, root, head)`; it answers each on stdout
the same way with `("ok", (fingerprint, build_ms))` or `("error", kind, message)`. It keeps
each repository's last fingerprint (`builds.run_build`), so builds are incremental. It exits at
end of input: when its parent closes the pipe or dies. The parent is trusted (it started this
process); nothing else can write to these pipes.
"""

from __future__ import annotations

import atexit
import json
import os
import pickle
import struct
import subprocess
import sys
import threading
from typing import IO, Any

from codecheck.errors import WorkerDied as WorkerDied  # noqa: F401  (defined in codecheck/errors.py, imported from here too)

_FRAME = struct.Struct(">Q")
_BOOTSTRAP = ("import json, sys; sys.path[:] = json.loads(sys.stdin.buffer.readline()); "
              "from codecheck import build_worker; build_worker.main()")


def _write(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME.pack(len(data)) + data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:
    header = stream.read(_FRAME.size)
    if len(header) < _FRAME.size:
        raise EOFError("the other side closed the pipe")
    size = _FRAME.unpack(header)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other side closed the pipe mid-message")
    return pickle.loads(data)  # our own parent or child, over a private pipe


class Worker:
    """The parent's handle: one child at a time, one request at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", _BOOTSTRAP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(sys.path).encode() + b"\n")
        proc.stdin.flush()
        return proc

    def call(self, request: tuple[object, ...]) -> Any:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None
            try:
                _write(proc.stdin, request)
                return _read(proc.stdout)
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                self._stop(proc)
                self._proc = None
                raise WorkerDied(f"the fingerprint worker (pid {proc.pid}) ended: {exc}") from None

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._stop(self._proc)
                self._proc = None


WORKER = Worker()
atexit.register(WORKER.close)


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    from codecheck import builds  # imported after sys.path is the parent's

    while True:
        try:
            builder, root, head = _read(stdin)
        except EOFError:
            return
        try:
            _write(stdout, ("ok", builds.run_build(builder, root, head)))
        except builds.WorkspaceError as exc:
            _write(stdout, ("error", exc.kind, str(exc)))
        except Exception as exc:  # noqa: BLE001 (a builder that broke: the parent reports it typed)
            _write(stdout, ("error", "unreadable", f"building the fingerprint failed: {exc!r}"))


BUILD_NICENESS = 10  # builds are background work: under contention the daemon's event loop runs first


def main() -> None:
    try:
        os.nice(BUILD_NICENESS)
    except OSError:
        pass  # not allowed to lower it here: build at the parent's priority
    stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # a builder that prints must not corrupt the protocol
    serve(sys.stdin.buffer, stdout)

