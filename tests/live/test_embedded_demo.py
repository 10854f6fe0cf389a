"""The embedded model as a user meets it (issue 42, item 2): `wake model fetch` (a no-op on the
cached build), then `wake demo wake` through the CLI, each a subprocess with its own state
directory: the command starts the cached llama-server for itself, runs a surface wake of the demo
agent on it, and stops it; `wake show --transcript` then holds an assistant turn and the call of
`local_time` with its answer.

It uses the cache the other live tests use ($WAKE_LLAMA_CACHE, else ~/.cache/wake/llama): without
a build it skips, saying why, unless `WAKE_REQUIRE_LLAMA=1` (`.ci/run`), where `wake model fetch`
builds it and a failure fails. Every assertion is on the harness: the row, the transcript, the
server gone after the command; never on the model's words.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import cli_fork, llama_fixtures
from wake.model import embedded

pytestmark = pytest.mark.live

FETCH_S = 3600.0  # a build from nothing (WAKE_REQUIRE_LLAMA=1 without a cache) takes about 11 min on 2 cores
WAKE_S = 900.0  # a loaded 2-core machine reads a 4,000-token prompt at 80 tokens/s

CLI = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def fetched_cache() -> Path:
    cache = embedded.default_cache_dir()
    if embedded.missing(cache):
        reason = embedded.toolchain_available()
        if reason:
            llama_fixtures._unavailable(reason)
        if os.environ.get("WAKE_REQUIRE_LLAMA") != "1":  # a test run does not start an 11-minute build by itself
            llama_fixtures._unavailable("the embedded model is not fetched yet: run `wake model fetch` once (about 11 min on 2 cores)")
    return cache.expanduser().resolve()


@pytest.fixture
def cli(tmp_path: Path, fetched_cache: Path) -> CLI:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_"))}
    env.update(WAKE_STATE_DIR=str(tmp_path / "state"), WAKE_LOG_FORMAT="json", WAKE_ENGINES__IDLE_S="0", WAKE_LLAMA_CACHE=str(fetched_cache))

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return cli_fork.run([sys.executable, "-m", "wake", *args], capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL, cwd=tmp_path)

    return run


def _events(stderr: str, name: str) -> list[dict[str, object]]:
    found = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == name:
                found.append(event)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").is_dir() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_model_fetch_then_the_demo_wake_thinks_calls_a_tool_and_leaves_a_transcript(cli: CLI, fetched_cache: Path) -> None:
    fetch = cli("model", "fetch", timeout=FETCH_S)
    assert fetch.returncode == 0, fetch.stderr[-3000:]
    assert f"llama-server: {embedded.server_binary(fetched_cache)}" in fetch.stdout, fetch.stdout
    again = cli("model", "fetch")
    assert again.returncode == 0 and "already fetched: nothing to do" in again.stdout, again.stdout
    assert cli("model", "status").returncode == 0

    demo = cli("demo", "wake", "--json", timeout=WAKE_S)
    assert demo.returncode == 0 and "Traceback" not in demo.stderr, demo.stderr[-4000:]
    out = json.loads(demo.stdout)
    assert out["status"] == "completed" and out["tier"] == "surface" and out["route"] == "embedded", out
    thinking = out["thinking"]
    assert thinking["model"] == "smollm2-135m" and thinking["turns"] >= 1 and thinking["tool_calls"] >= 1, thinking
    (started,) = _events(demo.stderr, "model.embedded_started")
    assert _events(demo.stderr, "model.embedded_stopped"), demo.stderr[-2000:]
    assert not _alive(int(str(started["pid"]))), "the embedded server outlived the command that started it"

    shown = cli("show", out["wake_id"], "--transcript", "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    transcript = json.loads(shown.stdout)
    assert any(m["role"] == "assistant" for m in transcript["messages"]), transcript["messages"]
    first = transcript["calls"][0]
    assert (first["tool"], first["outcome"], first["turn"]) == ("local_time", "ok", 1), transcript["calls"]
    text = cli("show", out["wake_id"], "--transcript")
    assert f"tool answer to {first['call_id']} local_time: ok" in text.stdout, text.stdout[-3000:]
