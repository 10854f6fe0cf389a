"""Poison input at `wake mcp serve --listen` (issue 41), a real server process over real
PostgreSQL: 60 KB of nested `[`, a body that is not UTF-8, a tool argument with a NUL or a lone
surrogate, a header that is not ASCII, are each a 4xx with one reason (or a JSON-RPC error),
never a 5xx; a property test drives the endpoint with generated bodies and headers, inside and
outside a session, and nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.integration.test_mcp_serve import _counts, _env
from tests.support import cli_fork
from wake.config import Config

AGENTS = '[agents.demo]\n[agents.demo.tiers.whisper]\nevery = "1d"\nbinds = ["wake.whisper"]\n'
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def served(store_config: Callable[..., Config], tmp_path: Path) -> Iterator[tuple[str, Config]]:
    config = store_config(agents=AGENTS)
    up = cli_fork.run([sys.executable, "-m", "wake", "--config", str(config.path), "up"], env=_env(tmp_path), capture_output=True,
                        text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert up.returncode == 0, up.stderr[-2000:]
    proc = subprocess.Popen([sys.executable, "-m", "wake", "--config", str(config.path), "mcp", "serve", "--agent", "demo", "--listen",
                             "127.0.0.1:0"], env=_env(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    try:
        url = None
        for line in proc.stderr:  # bounded by the process: it exits, or names its URL
            if line.startswith(b"{") and (event := json.loads(line)).get("event") == "mcp.listening":
                url = str(event["url"])
                break
        assert url is not None, "the server exited before it listened"
        yield url, config
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stderr.close()


def _rpc(method: str, params: dict[str, Any] | None = None, id_: int | None = 1) -> bytes:
    doc: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
    if id_ is not None:
        doc["id"] = id_
    return json.dumps(doc).encode()


def _session(http: httpx.Client, url: str) -> str:
    init = http.post(url, content=_rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                     "clientInfo": {"name": "t", "version": "1"}}), headers=ACCEPT)
    assert init.status_code == 200, init.text
    sid = init.headers["mcp-session-id"]
    done = http.post(url, content=_rpc("notifications/initialized", id_=None), headers={**ACCEPT, "mcp-session-id": sid})
    assert done.status_code < 300, done.text
    return sid


def _dsn(config: Config) -> str:
    assert config.postgres.dsn is not None
    return config.postgres.dsn


def test_poison_bodies_arguments_and_headers_are_4xx_or_rpc_errors(served: tuple[str, Config]) -> None:
    import asyncio

    url, config = served
    before = asyncio.run(_counts(_dsn(config)))
    with httpx.Client(timeout=60) as http:
        sid = _session(http, url)
        headers = {**ACCEPT, "mcp-session-id": sid}
        answers = {
            "nested": http.post(url, content=b"[" * 60_000, headers=headers),
            "not UTF-8": http.post(url, content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "x": "\xff\xfe"}', headers=headers),
            "NUL argument": http.post(url, content=_rpc("tools/call", {"name": "wake", "arguments": {"wake_id": "ab\u0000cd"}}), headers=headers),
            "NUL filter": http.post(url, content=_rpc("tools/call", {"name": "recent_wakes", "arguments": {"tier": "whis\u0000per"}}),
                                    headers=headers),
            "surrogate argument": http.post(url, headers=headers, content=(
                b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "wake", "arguments": {"wake_id": "\\ud800"}}}')),
            "non-ASCII session": http.post(url, content=_rpc("tools/list"), headers=[*ACCEPT.items(), ("mcp-session-id", b"\xff\xfe")]),
            "non-ASCII host": http.post(url, content=_rpc("tools/list"), headers=[*headers.items(), ("host", b"h\xffst")]),
        }
    after = asyncio.run(_counts(_dsn(config)))
    said = {what: _answer(r) for what, r in answers.items()}
    assert all(400 <= r.status_code < 500 or (r.status_code == 200 and _refused(said[w])) for w, r in answers.items()), said
    assert "nested" in answers["nested"].text or "recursion" in answers["nested"].text
    assert _refused(said["NUL argument"]) and "not an id" in json.dumps(said["NUL argument"])
    assert _refused(said["NUL filter"]) and "whisper" in json.dumps(said["NUL filter"])  # the tier refused, naming the tiers
    assert answers["surrogate argument"].status_code == 400 and answers["non-ASCII host"].status_code == 421
    assert after == before


def _answer(response: httpx.Response) -> Any:
    """The JSON-RPC message of an answer, plain JSON or the one `data:` of an event stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[0]) if data else None
    try:
        return response.json()
    except ValueError:
        return response.text


def _refused(message: Any) -> bool:
    """A JSON-RPC error, or a tool result marked as an error."""
    return isinstance(message, dict) and ("error" in message or bool((message.get("result") or {}).get("isError")))


_ANY = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=30)
_ARGS = st.dictionaries(st.sampled_from(["wake_id", "limit", "state", "tier", "status"]),
                        st.one_of(_ANY, st.integers(min_value=-(2**70), max_value=2**70), st.none(), st.floats()), max_size=3)
_TOOL = st.sampled_from(["recent_wakes", "wake", "wake_arrival", "wake_transcript", "binding_diff", "open_commitments", "findings",
                         "settled_state", "nothing"])
_BODY = st.one_of(
    st.tuples(_TOOL, _ARGS).map(lambda t: json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                                     "params": {"name": t[0], "arguments": t[1]}}).encode()),
    st.binary(max_size=200),
    st.integers(min_value=1, max_value=20_000).map(lambda n: b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": ' + b"[" * n),
    _ANY.map(lambda s: json.dumps({"jsonrpc": "2.0", "id": 2, "method": s}).encode()),
)
_HEADER = st.binary(min_size=1, max_size=30).map(lambda b: bytes(c for c in b if 0x21 <= c <= 0x7E or c >= 0x80) or b"x")


def test_generated_bodies_and_headers_never_get_a_5xx_and_write_nothing(served: tuple[str, Config]) -> None:
    import asyncio

    url, config = served
    before = asyncio.run(_counts(_dsn(config)))
    seen: list[int] = []
    with httpx.Client(timeout=60) as http:
        sid = _session(http, url)

        @settings(max_examples=120)
        @given(body=_BODY, in_session=st.booleans(), header=st.one_of(st.none(), st.tuples(
            st.sampled_from(["mcp-session-id", "mcp-protocol-version", "content-type", "accept", "host"]), _HEADER)))
        def check(body: bytes, in_session: bool, header: tuple[str, bytes] | None) -> None:
            headers: list[tuple[str, str | bytes]] = [*ACCEPT.items(), *([("mcp-session-id", sid)] if in_session else [])]
            if header is not None:
                headers = [(k, v) for k, v in headers if k != header[0]] + [header]
            answer = http.post(url, content=body, headers=headers)
            seen.append(answer.status_code)
            assert answer.status_code < 500, answer.text[:300]

        check()
    assert asyncio.run(_counts(_dsn(config))) == before
    assert any(400 <= s < 500 for s in seen)

