"""What the test servers run as child processes (Jaeger, Neo4j, llama.cpp) share: starting one and
waiting until it answers (`start_ready`), the command line of its module (`command_line`), and the `run` command that serves one until signalled
(`serve_until_signalled`)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from wake.model.child import ChildServer


class Served(Protocol):
    def running(self) -> bool: ...
    def stop(self) -> None: ...
    def log_tail(self) -> str: ...


S = TypeVar("S", bound=Served)


def command_line(name: str, cache_dir: Path, *, fetch_help: str, run_help: str) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """`python -m tests.support.<name>`'s parser, whose `fetch` and `run` commands take `--cache`
    (`cache_dir` by default) and `run` a `--workdir`; the parser and `run`'s, for more options."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--cache", type=Path, default=cache_dir)
    ap = argparse.ArgumentParser(prog=f"python -m tests.support.{name}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", parents=[common], help=fetch_help)
    run = sub.add_parser("run", parents=[common], help=run_help)
    run.add_argument("--workdir", type=Path, required=True)
    return ap, run


def start_ready(
    server: ChildServer, cmd: Sequence[str], probe: Callable[[], object], *, name: str, where: str, timeout_s: float,
    pause_s: float, log_tail: Callable[[], str], env: Mapping[str, str] | None = None,
    errors: tuple[type[BaseException], ...] = (Exception,),
) -> None:
    """Spawn `cmd` as `server`'s child and call `probe` every `pause_s` until it raises none of
    `errors`; the child stopped again if it exits, the `timeout_s` passes, or anything else fails."""
    server._spawn(cmd, env=env)
    try:
        deadline, last = time.monotonic() + timeout_s, "no attempt yet"
        while time.monotonic() < deadline:
            proc = server._proc
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}\n{log_tail()}")
            try:
                probe()
                return
            except errors as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(pause_s)
        raise TimeoutError(f"{name} not ready on {where} ({last})\n{log_tail()}")
    except BaseException:
        server.stop()
        raise


def serve_until_signalled(start: Callable[[], S], banner: Callable[[S], str], name: str) -> int:
    """The `run` command: start the server, print `banner` (its addresses), and stop it at SIGTERM
    or SIGINT; 1 if it dies first."""
    stop_now = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop_now.set())
    server = start()
    try:
        print(banner(server), flush=True)
        while not stop_now.wait(1.0):
            if not server.running():
                print(f"{name} died\n{server.log_tail()}", file=sys.stderr)
                return 1
    finally:
        server.stop()
    return 0
