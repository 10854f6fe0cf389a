"""A real Jaeger (v1 all-in-one, in-memory storage) for the trace tests, built from source with Go.

    python -m tests.support.jaeger_server fetch [--cache DIR]   # build once, print the binary
    python -m tests.support.jaeger_server run --workdir DIR     # prints OTLP_ENDPOINT= and QUERY_URL=

The binary is built from the module `github.com/jaegertracing/jaeger` at `JAEGER_VERSION`, fetched
by `go mod download` through the Go client's own module proxy setting, into $WAKE_JAEGER_CACHE or
~/.cache/wake/jaeger. (`go install ...@version` refuses a module whose go.mod has `replace`
directives, as Jaeger's does, so the module is copied and built in place.) The server listens on
free loopback ports: the OTLP/HTTP receiver the wake exports to, and the query API
(`/api/traces?service=...`) the test reads the spans back from.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from tests.support import child_servers, processes
from wake.model.child import ChildServer

JAEGER_MODULE = "github.com/jaegertracing/jaeger"
JAEGER_VERSION = "v1.75.0"
JAEGER_PACKAGE = "./cmd/all-in-one"


def default_cache_dir() -> Path:
    env = os.environ.get("WAKE_JAEGER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "wake" / "jaeger"


def binary_path(cache_dir: Path | None = None) -> Path:
    return Path(cache_dir or default_cache_dir()).expanduser().resolve() / JAEGER_VERSION / "all-in-one"


def go_binary() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    fallback = "/usr/local/go/bin/go"  # where the official tarball installs it, often not on PATH
    return fallback if os.access(fallback, os.X_OK) else None


@functools.cache
def unavailable(cache_dir: Path | None = None) -> str | None:
    """None if the binary is built or can be (Go is here), else why not (for pytest skips)."""
    if binary_path(cache_dir).is_file():
        return None
    if go_binary() is None:
        return f"Jaeger is not built at {binary_path(cache_dir)} and there is no `go` to build it (Go >= 1.24)"
    return None


def fetch(cache_dir: Path | None = None) -> Path:
    """Build Jaeger's all-in-one into the cache once (a lock for concurrent fetchers); its path."""
    binary = binary_path(cache_dir)
    if binary.is_file():
        return binary
    go = go_binary()
    if go is None:
        raise RuntimeError(f"no `go` on PATH or at /usr/local/go/bin/go to build Jaeger {JAEGER_VERSION}")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with open(binary.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():
            return binary
        got = subprocess.run([go, "mod", "download", "-json", f"{JAEGER_MODULE}@{JAEGER_VERSION}"], capture_output=True, text=True, check=False)
        if got.returncode != 0:
            raise RuntimeError(f"go mod download {JAEGER_MODULE}@{JAEGER_VERSION} failed: {got.stdout[-2000:]}{got.stderr[-2000:]}")
        source = Path(json.loads(got.stdout)["Dir"])
        with tempfile.TemporaryDirectory(prefix="jaeger-src-") as tmp:
            work = Path(tmp) / "jaeger"
            shutil.copytree(source, work)  # the module cache is read-only; the build writes go.sum entries
            for path in [work, *work.rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)
            partial = binary.with_suffix(".partial")
            env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "CGO_ENABLED": "0"}
            built = subprocess.run([go, "build", "-o", str(partial), JAEGER_PACKAGE], cwd=work, env=env, capture_output=True, text=True, check=False)
            if built.returncode != 0:
                raise RuntimeError(f"go build {JAEGER_PACKAGE} ({JAEGER_VERSION}) failed:\n{built.stderr[-4000:]}")
            partial.replace(binary)
    return binary


class JaegerServer(ChildServer):
    """One Jaeger all-in-one process with in-memory storage, on free loopback ports."""

    stop_timeout_s = 20

    def __init__(self, work_dir: Path, binary: Path | None = None) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.binary = binary
        self.log_path = self.work_dir / "jaeger.log"
        self.otlp_port = self.query_port = self.admin_port = 0
        super().__init__()

    @property
    def otlp_endpoint(self) -> str:
        """The OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT: the exporter adds /v1/traces)."""
        return f"http://127.0.0.1:{self.otlp_port}"

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.query_port}"

    def start(self, timeout_s: float = 60) -> JaegerServer:
        if self.running():
            return self
        binary = self.binary or fetch()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        ports = [processes.free_port() for _ in range(7)]
        self.otlp_port, self.query_port, self.admin_port = ports[0], ports[1], ports[2]
        loop = "127.0.0.1"
        cmd = [
            str(binary),
            f"--collector.otlp.http.host-port={loop}:{ports[0]}", f"--collector.otlp.grpc.host-port={loop}:{ports[3]}",
            f"--query.http-server.host-port={loop}:{ports[1]}", f"--query.grpc-server.host-port={loop}:{ports[4]}",
            f"--admin.http.host-port={loop}:{ports[2]}",
            f"--collector.http-server.host-port={loop}:{ports[5]}", f"--collector.grpc-server.host-port={loop}:{ports[6]}",
        ]
        env = {**os.environ, "SPAN_STORAGE_TYPE": "memory", "COLLECTOR_OTLP_ENABLED": "true"}
        child_servers.start_ready(
            self, cmd, self._answers, name="jaeger", where=self.query_url, timeout_s=timeout_s, pause_s=0.2,
            log_tail=self.log_tail, env=env, errors=(OSError,),
        )
        return self

    def _answers(self) -> None:
        self.query("/api/services")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/", timeout=2) as answer:
            if answer.status != 200:
                raise OSError(f"the admin port answered {answer.status}")

    def query(self, path: str) -> Any:
        """GET the query API; its JSON."""
        with urllib.request.urlopen(self.query_url + path, timeout=10) as answer:
            return json.loads(answer.read())

    def traces(self, service: str) -> list[dict[str, Any]]:
        data = self.query(f"/api/traces?service={service}&limit=100&lookback=1h")
        return list(data.get("data") or [])

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.is_file():
            return "(no log written)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])



def main(argv: list[str] | None = None) -> int:
    ap, _ = child_servers.command_line(
        "jaeger_server", default_cache_dir(), fetch_help="build Jaeger's all-in-one (idempotent)",
        run_help="start, print OTLP_ENDPOINT= and QUERY_URL=, wait for SIGTERM",
    )
    args = ap.parse_args(argv)
    reason = unavailable(args.cache)
    if reason:
        print(f"jaeger_server: {reason}", file=sys.stderr)
        return 2
    try:
        binary = fetch(args.cache)
    except RuntimeError as exc:
        print(f"jaeger_server: {exc}", file=sys.stderr)
        return 1
    if args.cmd == "fetch":
        print(binary)
        return 0
    return child_servers.serve_until_signalled(
        JaegerServer(args.workdir, binary=binary).start, lambda s: f"OTLP_ENDPOINT={s.otlp_endpoint}\nQUERY_URL={s.query_url}", "jaeger",
    )


if __name__ == "__main__":
    sys.exit(main())
