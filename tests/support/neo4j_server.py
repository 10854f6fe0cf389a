"""A real Neo4j Community server for tests, run from Maven Central jars (no Docker).

    python -m tests.support.neo4j_server fetch --cache DIR
    python -m tests.support.neo4j_server run --cache DIR --workdir DIR   # prints NEO4J_URI=...
"""

from __future__ import annotations

import fcntl
import functools
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support import child_servers, processes
from wake.model.child import ChildServer

NEO4J_VERSION = "5.26.30"
_DEP_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>wake.tests</groupId><artifactId>neo4j-fetch</artifactId><version>0</version>
  <packaging>pom</packaging><dependencies><dependency><groupId>org.neo4j</groupId>
  <artifactId>neo4j</artifactId><version>{version}</version></dependency></dependencies>
</project>
"""
_JVM_OPTS = [
    # small heap, serial GC and C1 only: ~5 s start, ~300 MB RSS (G1 + C2: ~6 s, ~650 MB)
    "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
    "-XX:-OmitStackTraceInFastThrow", "-Djdk.nio.maxCachedBufferSize=1024",
    "-Dio.netty.tryReflectionSetAccessible=true", "-Dlog4j2.disable.jmx=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
]
_ENTRY_POINT = "org.neo4j.server.CommunityEntryPoint"


def default_cache_dir() -> Path:
    env = os.environ.get("WAKE_NEO4J_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "wake" / "neo4j"


@functools.cache
def java_and_maven_available() -> str | None:
    """None if `java` (>= 17) and `mvn` are usable, else why not (for pytest skips)."""
    java = shutil.which("java")
    if java is None or shutil.which("mvn") is None:
        missing = "java" if java is None else "mvn"
        return f"{missing} not on PATH (the Neo4j test server needs Java >= 17 and mvn)"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`java -version` failed: {exc}"
    m = re.search(r'version "(?:1\.)?(\d+)', out.stderr + out.stdout)
    if m is None:
        return f"cannot parse `java -version` output: {out.stderr.strip()[:200]}"
    return None if int(m.group(1)) >= 17 else f"java {m.group(1)} found, Neo4j 5.26 needs >= 17"


def fetch(cache_dir: Path, version: str = NEO4J_VERSION) -> Path:
    """Put org.neo4j:neo4j:<version> and its runtime deps into cache_dir/neo4j-<version>/lib.

    Idempotent (a `.complete` marker); returns the lib directory."""
    dest = Path(cache_dir).expanduser().resolve() / f"neo4j-{version}"
    lib, marker = dest / "lib", dest / ".complete"
    if marker.is_file() and lib.is_dir():
        return lib
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".lock", "w") as lock:  # concurrent fetchers (e.g. pytest-xdist) wait here
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (marker.is_file() and lib.is_dir()):
            _mvn_copy(version, dest, lib)
        marker.write_text(f"{version}\n")
    return lib


def _mvn_copy(version: str, dest: Path, lib: Path) -> None:
    with tempfile.TemporaryDirectory(dir=dest, prefix=".fetch-") as tmp:
        pom, out = Path(tmp) / "pom.xml", Path(tmp) / "lib"
        pom.write_text(_POM.format(version=version))
        cmd = ["mvn", "-B", "-q", "-f", str(pom), _DEP_PLUGIN,
               f"-DoutputDirectory={out}", "-DincludeScope=runtime"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0 or not any(out.glob("neo4j-*.jar")):
            raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n"
                               f"{(res.stdout + res.stderr)[-4000:]}")
        shutil.rmtree(lib, ignore_errors=True)
        out.rename(lib)


class Neo4jServer(ChildServer):
    """One Neo4j Community server process with its own home under `work_dir`."""

    stop_timeout_s = 30

    def __init__(self, work_dir: Path, lib_dir: Path | None = None,
                 cache_dir: Path | None = None, port: int | None = None) -> None:
        self.work_dir = Path(work_dir).resolve()
        self._lib_dir = lib_dir
        self._cache_dir = cache_dir
        self.port = port or 0
        self.home = self.work_dir / "neo4j-home"
        self.log_path = self.home / "logs" / "console.log"
        super().__init__()

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.port}"

    def _write_conf(self) -> Path:
        dirs = ("data", "logs", "plugins", "import", "run", "licenses")
        for d in ("conf", *dirs):
            (self.home / d).mkdir(parents=True, exist_ok=True)
        conf = {
            "dbms.security.auth_enabled": "false",
            "server.default_listen_address": "127.0.0.1",
            "server.bolt.enabled": "true",
            "server.bolt.listen_address": f"127.0.0.1:{self.port}",
            "server.bolt.advertised_address": f"127.0.0.1:{self.port}",
            "server.http.enabled": "false",
            "server.https.enabled": "false",
            "server.memory.pagecache.size": "64m",
            "dbms.usage_report.enabled": "false",
            "db.tx_log.preallocate": "false",
            "db.tx_log.rotation.retention_policy": "1 files",
            "db.logs.query.enabled": "OFF",
            # unsupported knobs: without them a SIGTERM stop takes ~10 s (2x5 s Bolt waits)
            "internal.server.bolt.thread_pool_shutdown_wait_time": "0s",
            "internal.server.bolt.connection_shutdown_wait_time": "0s",
            "server.directories.lib": str(self._lib_dir),
            **{f"server.directories.{d}": str(self.home / d) for d in dirs},
        }
        text = "".join(f"{k}={v}\n" for k, v in conf.items())
        (self.home / "conf" / "neo4j.conf").write_text(text)
        return self.home / "conf"

    def start(self, timeout_s: float = 120) -> Neo4jServer:
        if self.running():
            return self
        if self._lib_dir is None:
            self._lib_dir = fetch(self._cache_dir or default_cache_dir())
        if not self.port:
            self.port = processes.free_port()
        conf_dir = self._write_conf()
        cmd = ["java", *_JVM_OPTS, "-cp", f"{self._lib_dir}/*", _ENTRY_POINT,
               f"--home-dir={self.home}", f"--config-dir={conf_dir}"]
        child_servers.start_ready(
            self, cmd, self._answers, name="neo4j", where=self.uri, timeout_s=timeout_s, pause_s=0.25, log_tail=self.log_tail,
        )
        return self

    def _answers(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            pass
        try:
            import neo4j  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            return  # TCP check only
        with neo4j.GraphDatabase.driver(self.uri, auth=None) as driver:
            records, _, _ = driver.execute_query("RETURN 1 AS x")
            if records[0]["x"] != 1:
                raise RuntimeError(f"unexpected answer {records!r}")

    def log_tail(self, lines: int = 40) -> str:
        parts, logs = [], self.home / "logs"
        for p in (self.log_path, logs / "neo4j.log", logs / "debug.log"):
            if p.is_file():
                tail = p.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- tail of {p} ---\n" + "\n".join(tail))
        return "\n".join(parts) or "(no log written)"



def main(argv: list[str] | None = None) -> int:
    ap, run = child_servers.command_line(
        "neo4j_server", default_cache_dir(), fetch_help="download the jars (idempotent)", run_help="start, print NEO4J_URI=, wait for SIGTERM",
    )
    run.add_argument("--port", type=int, default=0)
    run.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args(argv)
    reason = java_and_maven_available()
    if reason:
        print(f"neo4j_server: {reason}", file=sys.stderr)
        return 2
    lib = fetch(args.cache)
    if args.cmd == "fetch":
        print(lib)
        return 0
    server = Neo4jServer(args.workdir, lib_dir=lib, port=args.port)
    return child_servers.serve_until_signalled(lambda: server.start(args.timeout), lambda s: f"NEO4J_URI={s.uri}", "neo4j")


if __name__ == "__main__":
    sys.exit(main())
