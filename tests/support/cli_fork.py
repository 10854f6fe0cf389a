"""`python -m wake ...` for the tests, forked from an interpreter that has already imported wake.

Most of a CLI command's CPU is its imports (docs/performance.md, "Where the CPU goes, counted":
about 0.35 of a command's 0.45 CPU-seconds here), and the suite runs about 600 of them. `run` has
`subprocess.run`'s signature and result; for a `[sys.executable, "-m", "wake", ...]` command it
asks this worker's fork server (started on first use: `python -m tests.support.cli_fork`, which
imports every command's module and the libraries they load, then waits) to fork a child that runs
the command. Every other command, and every command when `WAKE_TEST_CLI_FORK=0`, runs as a plain
subprocess.

The child is a process of its own, as a subprocess's is: its own pid, its stdin, stdout and stderr
on the pipes `run` made, the command's environment (os.environ replaced, PYTHONPATH's entries put
on sys.path where an interpreter started with it has them), the working directory, the default
signal handlers, `sys.argv` as `python -m wake` sets it, and the interpreter's end as Python runs
it (threads joined, atexit handlers, the streams flushed; an uncaught exception's traceback and
status 1; SystemExit's code). `run` returns its exit status as `subprocess.run` would (a signal's
as its negative), and kills it when the timeout passes (`subprocess.TimeoutExpired`).

What differs is what was imported before the command began: a module's import-time code ran once,
in the server, under the worker's environment. wake reads its environment in one place, at run
time (`wake.config.loader`), so that is the same; what a command *imports* is not, and the tests
of that (tests/integration/test_cli_imports.py, bench/cli.py) start their own interpreter. So do
the tests that give a command a terminal, signal it while it runs or read its output as it comes
(`subprocess.Popen` and asyncio's subprocesses are never routed here).
"""

from __future__ import annotations

import atexit
import importlib
import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_MAX_FDS = 4  # stdin, stdout, stderr, the reply socket
_HEADER = 1 << 20  # a request's argv, environment and working directory fit in a megabyte

# What the server imports before it forks anything: the commands' modules (the table of
# wake.cli.commands) and what their bodies import when they run.
PRELOAD = (
    "wake.cli.main", "wake.config", "wake.logs", "wake.stores", "wake.run.cycle", "wake.daemon.service", "wake.console",
    "surfaces.loader", "memory.repo", "ledgers.introspection", "ledgers.graph", "asyncpg", "redis.asyncio", "neo4j", "httpx",
    "pygit2", "structlog", "pydantic", "uvloop", "mcp", "starlette", "apscheduler.schedulers.asyncio",
)


def enabled() -> bool:
    return os.environ.get("WAKE_TEST_CLI_FORK", "1") != "0"


def _is_wake(cmd: Sequence[str | bytes]) -> bool:
    return len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m" and cmd[2] == "wake"


def run(
    cmd: Sequence[str | bytes], *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None, timeout: float | None = None,
    input: str | None = None, stdin: int | None = None, capture_output: bool = False, text: bool = False, check: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run(cmd, capture_output=True, ...)`; forked from the server for `python -m wake`."""
    if not (capture_output and enabled() and _is_wake(cmd)):
        return subprocess.run(list(cmd), env=env, cwd=cwd, timeout=timeout, input=input, stdin=stdin, capture_output=capture_output,
                              text=text, check=check)
    args = [os.fsdecode(a) for a in cmd[3:]]  # bytes as the child's interpreter decodes its argv (surrogateescape)
    done = _server().run(args, dict(os.environ if env is None else env), os.fspath(cwd or os.getcwd()), timeout,
                         input.encode() if input is not None and text else input)  # type: ignore[arg-type]
    out, err = (_text(done.stdout), _text(done.stderr)) if text else (done.stdout, done.stderr)
    result = subprocess.CompletedProcess(list(cmd), done.returncode, out, err)
    if check:
        result.check_returncode()
    return result


def _text(data: bytes) -> str:
    """As `subprocess.run(text=True)` decodes: the locale's encoding (UTF-8 here), universal newlines."""
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")


class _Server:
    """This process's fork server: one child process, one control socket (a record per request)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cli_fork", str(theirs.fileno())], pass_fds=[theirs.fileno()], env=env, cwd=REPO,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self.control = ours
        ready = ours.recv(64)
        if ready != b"ready":
            raise RuntimeError(f"the CLI fork server did not start (it said {ready[:64]!r}; its stderr is the test's)")

    def run(self, args: list[str], env: dict[str, str], cwd: str, timeout: float | None, data: bytes | None) -> subprocess.CompletedProcess[bytes]:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        if data is not None:
            in_r, in_w = os.pipe()
        else:
            in_r, in_w = os.open(os.devnull, os.O_RDONLY), -1
        try:
            reply = self.start(args, env, cwd, (in_r, out_w, err_w))
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        if in_w >= 0:
            threading.Thread(target=_feed, args=(in_w, data or b""), daemon=True).start()
        return _collect(reply, out_r, err_r, args, timeout)

    def start(self, args: list[str], env: dict[str, str], cwd: str, stdio: tuple[int, int, int]) -> socket.socket:
        """Fork a child running `wake ARGS` on the descriptors `stdio`; returns the socket its pid
        and its wait status will come on (the caller keeps its own copies of `stdio`)."""
        reply, reply_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            request = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
            socket.send_fds(self.control, [request], [*stdio, reply_theirs.fileno()])
        finally:
            reply_theirs.close()
        return reply


class Forked:
    """A started `wake` child, as much of `subprocess.Popen` as the tests use: `pid`, `poll`,
    `wait`, `send_signal`, `terminate`, `kill`, `returncode`."""

    def __init__(self, args: list[str], reply: socket.socket) -> None:
        self.args = args
        self._reply = reply
        self._said = bytearray()
        self.returncode: int | None = None
        while "pid" not in _said(self._said):
            self._read(None)
        self.pid = _said(self._said)["pid"]

    def _read(self, timeout: float | None) -> bool:
        """Read what the server said within `timeout`; False when nothing came."""
        self._reply.settimeout(timeout)
        try:
            part = self._reply.recv(4096)
        except (TimeoutError, BlockingIOError):
            return False
        if not part:
            raise RuntimeError(f"the CLI fork server ended before wake {' '.join(self.args)[:200]} did")
        self._said += part
        return True

    def poll(self) -> int | None:
        while self.returncode is None and self._read(0):
            status = _said(self._said).get("status")
            if status is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
                self._reply.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired([sys.executable, "-m", "wake", *self.args], timeout or 0.0)
            sel = selectors.DefaultSelector()
            try:
                sel.register(self._reply, selectors.EVENT_READ)
                sel.select(left)
            finally:
                sel.close()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def popen(cmd: Sequence[str], *, stdout: int, env: Mapping[str, str], cwd: str | os.PathLike[str]) -> Forked | subprocess.Popen[bytes]:
    """`subprocess.Popen(cmd, stdin=DEVNULL, stdout=stdout, stderr=STDOUT)` for a long-running
    `python -m wake` (a daemon): forked from the server, or a plain subprocess when
    `WAKE_TEST_CLI_FORK=0`. `stdout` is a descriptor the caller keeps open."""
    if not (enabled() and _is_wake(cmd)):
        return subprocess.Popen(list(cmd), stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    args = [os.fsdecode(a) for a in cmd[3:]]
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        reply = _server().start(args, dict(env), os.fspath(cwd), (devnull, stdout, stdout))
    finally:
        os.close(devnull)
    return Forked(args, reply)


def _feed(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BrokenPipeError:
        pass


def _collect(reply: socket.socket, out_r: int, err_r: int, args: list[str], timeout: float | None) -> subprocess.CompletedProcess[bytes]:
    """Read the child's stdout and stderr to their end and its status from the server, within `timeout`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    said = bytearray()
    sel = selectors.DefaultSelector()
    for fd in (out_r, err_r, reply.fileno()):
        sel.register(fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if "pid" not in _said(said):  # the server has not said it yet: it will, once it has forked
                    reply.settimeout(10)
                    said += reply.recv(4096)
                _kill(_said(said).get("pid"))
                raise subprocess.TimeoutExpired([sys.executable, "-m", "wake", *args], timeout or 0.0,
                                                b"".join(chunks[out_r]), b"".join(chunks[err_r]))
            for key, _ in sel.select(left):
                fd = int(key.fd)
                part = os.read(fd, 65536)
                if not part:
                    sel.unregister(fd)
                elif fd == reply.fileno():
                    said += part
                else:
                    chunks[fd].append(part)
    finally:
        sel.close()
        for fd in (out_r, err_r):
            os.close(fd)
        reply.close()
    status = _said(said).get("status")
    if status is None:
        raise RuntimeError(f"the CLI fork server gave no exit status for wake {' '.join(args)[:200]}")
    return subprocess.CompletedProcess(args, os.waitstatus_to_exitcode(status), b"".join(chunks[out_r]), b"".join(chunks[err_r]))


def _said(data: bytes | bytearray) -> dict[str, int]:
    """What the server said on a reply socket: the child's pid, then its wait status (a JSON line each)."""
    said: dict[str, int] = {}
    for line in bytes(data).split(b"\n")[:-1]:
        said.update(json.loads(line))
    return said


def _kill(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_lock = threading.Lock()
_instance: _Server | None = None


def _server() -> _Server:
    global _instance
    with _lock:
        if _instance is None or _instance.proc.poll() is not None:
            _instance = _Server()
            atexit.register(_stop, _instance)
        return _instance


def _stop(server: _Server) -> None:
    server.control.close()  # the server ends when its control socket does
    try:
        server.proc.wait(10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(10)


# --- the server's side ----------------------------------------------------------------------------


def serve(control: socket.socket) -> None:
    """Import, then fork a child per request until the control socket closes; report each child's
    pid when it starts and its wait status when it ends, on the request's reply socket."""
    for name in PRELOAD:
        importlib.import_module(name)
    from wake.cli import commands

    for entry in commands.COMMANDS.values():
        importlib.import_module(entry.target.partition(":")[0])
    if threading.active_count() != 1:  # a fork copies one thread: an import that started one would leave it behind
        raise RuntimeError(f"an import started a thread: {[t.name for t in threading.enumerate()]}")
    sys.stdout.flush()
    sys.stderr.flush()
    base_path = [p for p in sys.path[1:] if p not in _pythonpath(os.environ)]
    control.send(b"ready")
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ)
    waiting: dict[int, tuple[int, socket.socket]] = {}  # pidfd: (pid, reply)
    while True:
        for key, _ in sel.select():
            if key.fileobj is control:
                request, fds, _flags, _addr = socket.recv_fds(control, _HEADER, _MAX_FDS)
                if not request:
                    return  # the worker is gone; its children finish on their own
                reply = socket.socket(fileno=fds[3])
                pid = os.fork()
                if pid == 0:
                    _child(json.loads(request), fds, base_path,
                           [sel.fileno(), control.fileno(), *waiting, *(r.fileno() for _, r in waiting.values())])
                for fd in fds[:3]:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                waiting[pidfd] = (pid, reply)
                sel.register(pidfd, selectors.EVENT_READ)
                _say(reply, {"pid": pid})
            else:
                pidfd = int(key.fd)
                pid, reply = waiting.pop(pidfd)
                sel.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                _say(reply, {"status": status})
                reply.close()


def _say(reply: socket.socket, message: dict[str, int]) -> None:
    try:
        reply.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the test stopped listening (it timed out and killed the child)


def _pythonpath(environ: Mapping[str, str]) -> list[str]:
    return [os.path.abspath(p) for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _child(request: dict[str, Any], fds: list[int], base_path: list[str], inherited: list[int]) -> None:
    """In the forked child: become `python -m wake ARGS` in the request's environment, run it, end as
    the interpreter would. Never returns."""
    code = 1
    try:
        for fd in inherited:
            os.close(fd)
        os.close(fds[3])
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
            os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = [request["cwd"], *_pythonpath(request["env"]), *base_path]
        importlib.invalidate_caches()
        time.tzset()
        if isinstance(sys.stdout, io.TextIOWrapper):
            sys.stdout.reconfigure(line_buffering=os.isatty(1))
        sys.argv = ["wake", *request["args"]]
        code = _main()
    except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
        traceback.print_exc()
    finally:
        os._exit(code)


def _main() -> int:
    """Run wake's `__main__` and end as Python does: the status of SystemExit or of an uncaught
    exception (its traceback printed), then the threads joined, atexit's handlers, the streams flushed."""
    import runpy

    code = 0
    try:
        runpy.run_module("wake", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        _finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # as Python ends on an uncaught KeyboardInterrupt
    except BaseException:  # noqa: BLE001 - the interpreter prints it and exits 1
        traceback.print_exc()
        code = 1
    _finish()
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _finish() -> None:
    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter does first at its end
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal is the worker's to handle
    serve(socket.socket(fileno=int(sys.argv[1])))
