"""A scripted OpenAI-compatible server on loopback: real HTTP/1.1, real sockets, real status codes.

Each POST to `/v1/chat/completions` takes the next scripted `Response` (or, when the script is
empty, answers "Nothing to do." without tool calls). Every request is recorded with its raw body,
its headers, the client's address and when it arrived.

Usage is derived from the request like a provider with a prompt cache would report it: prompt
tokens = body bytes / 4, cached tokens = the prefix shared with the previous request / 4,
completion tokens = reply bytes / 4 (`bytes_per_token` changes the 4). A scripted `cost` is
reported as OpenRouter's `usage.cost`. Like llama.cpp it answers `/apply-template` (the prompt is
the request body) and `/tokenize` (a token per `bytes_per_token` bytes); those are recorded in
`side_requests`, not `requests`. Test suites and `bench/prompt_cache.py` share it.
"""

from __future__ import annotations

import collections
import http.server
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback_http import LoopbackServer, QuietHandler


@dataclass
class Response:
    status: int = 200
    body: Any = None  # a dict is sent as JSON (usage filled in for a completion), bytes as they are
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    cost: float | None = None


@dataclass
class Recorded:
    at: float  # time.monotonic()
    path: str
    headers: dict[str, str]
    raw: bytes
    client: tuple[str, int]

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.raw)

    @property
    def tool_names(self) -> list[str] | None:
        tools = self.json.get("tools")
        return None if tools is None else [t["function"]["name"] for t in tools]


def completion(
    content: str | None = None, tool_calls: list[tuple[str, Any]] | None = None, *, finish_reason: str | None = None, cost: float | None = None
) -> Response:
    """A 200 chat completion; `tool_calls` are (name, arguments) with arguments a dict or a raw string."""
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for i, (name, args) in enumerate(tool_calls or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    body = {
        "id": "chatcmpl-scripted", "object": "chat.completion", "model": "scripted-1",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason or ("tool_calls" if calls else "stop")}],
    }
    return Response(body=body, cost=cost)


def error(status: int, message: str = "scripted failure", **headers: str) -> Response:
    return Response(status=status, body={"error": {"code": status, "message": message}}, headers=headers)


def _common_prefix(a: bytes, b: bytes) -> int:
    return len(os.path.commonprefix([a, b]))


def _with_usage(step: Response, raw: bytes, previous: bytes, per: int) -> Any:
    """A completion's body with the usage a real server reports: tokens from sizes, cached from the
    prefix shared with the previous request, and the step's cost if it has one."""
    body = step.body
    if not (isinstance(body, dict) and "choices" in body):
        return body
    reply = json.dumps(body["choices"][0]["message"]).encode()
    usage: dict[str, Any] = {
        "prompt_tokens": len(raw) // per,
        "completion_tokens": max(1, len(reply) // per),
        "prompt_tokens_details": {"cached_tokens": _common_prefix(previous, raw) // per},
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if step.cost is not None:
        usage["cost"] = step.cost
    return {**body, "usage": usage}


def _serve_models(handler: http.server.BaseHTTPRequestHandler) -> None:
    """`GET /models`, as an OpenAI-compatible server lists its models (`wake doctor` asks)."""
    found = handler.path.endswith("/models")
    data = json.dumps({"object": "list", "data": [{"id": "scripted-1", "object": "model"}]} if found else {}).encode()
    handler.send_response(200 if found else 404)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class ScriptedServer(LoopbackServer):
    def __init__(self, default: Callable[[dict[str, Any]], Response] | None = None) -> None:
        """`default(request_json)` answers when the script is empty (else "Nothing to do.")."""
        self.default = default or (lambda _request: completion("Nothing to do."))
        self.script: collections.deque[Response] = collections.deque()
        self.requests: list[Recorded] = []
        self.side_requests: list[Recorded] = []
        self.bytes_per_token = 4
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            do_GET = _serve_models

            def do_POST(self) -> None:
                raw = self.body()
                if not self.path.endswith("/chat/completions"):
                    self._side(raw)
                    return
                with server._lock:
                    previous = server.requests[-1].raw if server.requests else b""
                    server.requests.append(
                        Recorded(time.monotonic(), self.path, {k.lower(): v for k, v in self.headers.items()}, raw, self.client_address)
                    )
                    step = server.script.popleft() if server.script else server.default(json.loads(raw))
                if step.delay_s:
                    time.sleep(step.delay_s)
                body = _with_usage(step, raw, previous, server.bytes_per_token)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(step.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in step.headers.items():
                        self.send_header(k.replace("_", "-"), v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _side(self, raw: bytes) -> None:
                """llama.cpp's /apply-template and /tokenize; 404 for anything else."""
                with server._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    server.side_requests.append(Recorded(time.monotonic(), self.path, headers, raw, self.client_address))
                if self.path == "/apply-template":
                    answer: Any = {"prompt": raw.decode("utf-8")}
                elif self.path == "/tokenize":
                    answer = {"tokens": list(range(len(json.loads(raw)["content"].encode("utf-8")) // server.bytes_per_token))}
                else:
                    answer = None
                data = json.dumps(answer if answer is not None else {"error": "not found"}).encode()
                self.send_response(200 if answer is not None else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._serve(Handler, "scripted-openai", block_on_close=False)

    @property
    def url(self) -> str:
        """The OpenAI base URL; llama.cpp's own endpoints (a route's `tokenizer_url`) are at `root_url`."""
        return f"{self.root_url}/v1"

    def push(self, *responses: Response) -> None:
        with self._lock:
            self.script.extend(responses)

