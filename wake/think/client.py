"""The model client: OpenAI-compatible chat completions with tools, over one httpx AsyncClient.

OpenRouter, vLLM, Ollama and the llama.cpp server all speak this API; a tier's route
(`[models.<name>]`) names the base URL, the model, the prices and the retry policy.

Retry policy (the decision is data: `Failure.retryable` and `Failure.wait_s`, read by tenacity):

- retried: HTTP 408, 409, 429 and 5xx; timeouts and transport errors; an error carried inside a
  200 body, or `finish_reason: "error"`, when its code is one of those (or it has none);
- never retried: any other 4xx, a body that is not a chat completion;
- the wait honours `retry-after-ms`, then `Retry-After` (seconds or an HTTP date), up to
  `retry_cap_s`; without either, exponential backoff with jitter up to the same cap;
- every response is closed before the next attempt;
- a failed attempt's status and body are logged (`model.retry`); when the retries run out, the
  error says how many attempts ended with the same error (a 500 that is really a validation
  error costs every attempt).

The fields wake sets (`config.HARNESS_BODY_KEYS`) win over a route's `extra_body`, which config
refuses to set them anyway. `count_prompt_tokens` asks a llama.cpp server (`tokenizer_url`) how
many tokens a request's prompt renders to.

A route of `kind = "embedded"` has no URL of its own: its first call starts the cached llama-server
(`wake.model.embedded`, fetched by `wake model fetch`) on loopback for this client, every later call
of the process reuses it, and `aclose` stops it; its base URL and tokenizer URL are that server's.

A failure is never an empty success: it raises `ModelError` with the status and the provider's
message.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import json
import random
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tenacity

from wake import clock, logs, secrets
from wake.config import HARNESS_BODY_KEYS, ModelRoute
from wake.errors import Failure, ModelError, ModelUnavailable
from wake.observe import tracing

if TYPE_CHECKING:  # loaded with the first model call: a command that calls no model never imports it
    import httpx

    from wake.model import embedded

log = logs.get("wake.model")

RETRYABLE_STATUS = frozenset({408, 409, 429})
BACKOFF_BASE_S = 0.5
CONNECT_TIMEOUT_S = 10.0
ERROR_BODY_MAX_CHARS = 1000  # of a failed response's body, in the log and the error
# Keep-alive connections for the whole process; a wake makes its calls one after another.
POOL_LIMITS: dict[str, Any] = {"max_connections": 20, "max_keepalive_connections": 10, "keepalive_expiry": 60.0}
EMBEDDED_START_S = 120.0  # an embedded route's server loads its model in 3-8 s; a loaded machine may take longer


@dataclass(frozen=True, kw_only=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    cost_reported: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            cost_reported=self.cost_reported or other.cost_reported,
        )


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One completed call: the assistant message, why it stopped, what it cost."""

    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    usage: Usage
    attempts: int
    latency_ms: float
    response_model: str | None = None  # the model the server says answered (the body's `model`)
    response_id: str | None = None


def is_retryable_status(status: int | None) -> bool:
    return status is None or status in RETRYABLE_STATUS or 500 <= status <= 599


def retry_after_s(headers: Mapping[str, str], now: dt.datetime | None = None) -> float | None:
    """The server's requested wait: `retry-after-ms`, else `Retry-After` in seconds or as an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - (now or clock.now())).total_seconds())


def cost_of(route: ModelRoute, prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> float:
    """USD from the route's prices; cached prompt tokens at the cached price (default: input price)."""
    cached_price = route.input_usd_per_mtok if route.cached_input_usd_per_mtok is None else route.cached_input_usd_per_mtok
    return (
        (prompt_tokens - cached_tokens) * route.input_usd_per_mtok
        + cached_tokens * cached_price
        + completion_tokens * route.output_usd_per_mtok
    ) / 1_000_000


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def usage_of(route: ModelRoute, body: Mapping[str, Any]) -> Usage:
    raw = body.get("usage") or {}
    prompt, completion = _int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens"))
    cached = min(prompt, _int((raw.get("prompt_tokens_details") or {}).get("cached_tokens")))
    reported = raw.get("cost")
    if isinstance(reported, (int, float)) and not isinstance(reported, bool):
        return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached, cost_usd=float(reported), cost_reported=True)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached, cost_usd=cost_of(route, prompt, completion, cached))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _error_status(error: Any) -> int | None:
    code = error.get("code") if isinstance(error, Mapping) else None
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if isinstance(code, str) and code.isdigit():
        return int(code)
    return None


def _error_message(error: Any) -> str:
    if isinstance(error, Mapping):
        return str(error.get("message") or json.dumps(error)[:300])
    return str(error)[:300]


def parse(route: ModelRoute, body: Any) -> tuple[dict[str, Any], str | None, Usage]:
    """The first choice's message, its finish reason and the usage of a 200 body; raises `Failure`
    for an error inside the body and for a body that is not a chat completion."""
    if not isinstance(body, Mapping):
        raise Failure(f"malformed response: expected a JSON object, got {type(body).__name__}", status=None, retryable=False)
    if body.get("error") is not None:
        status = _error_status(body["error"])
        raise Failure(
            f"provider error in a 200 body (code {status}): {_error_message(body['error'])}", status=status, retryable=is_retryable_status(status)
        )
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise Failure("malformed response: no choices", status=None, retryable=False)
    choice = choices[0]
    finish = choice.get("finish_reason")
    if finish == "error" or choice.get("error") is not None:
        status = _error_status(choice.get("error"))
        raise Failure(
            f"provider error mid-generation (code {status}): {_error_message(choice.get('error') or 'finish_reason error')}",
            status=status,
            retryable=is_retryable_status(status),
        )
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise Failure("malformed response: the choice has no message", status=None, retryable=False)
    return dict(message), finish, usage_of(route, body)


class Client:
    """One per process (the session holds it); every route shares its keep-alive pool."""

    def __init__(self, *, embedded_dir: Path | None = None) -> None:
        self._http: httpx.AsyncClient | None = None
        # The embedded routes' servers, by (model, context window), and a start that failed (not
        # tried again by this client: each wake would wait out the same failure); their logs go
        # to `embedded_dir` (the session's: the state directory), else a temporary directory.
        self._embedded_dir = embedded_dir
        self._servers: dict[tuple[str, int], embedded.LlamaServer] = {}
        self._failed: dict[tuple[str, int], ModelUnavailable] = {}
        self._starting: asyncio.Lock | None = None
        self._temporary: list[Path] = []  # removed by aclose

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(limits=httpx.Limits(**POOL_LIMITS), http2=False)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            await asyncio.to_thread(server.stop)
            log.info("model.embedded_stopped", port=server.port)
        temporary, self._temporary = self._temporary, []
        for path in temporary:
            await asyncio.to_thread(shutil.rmtree, path, True)

    async def where(self, route: ModelRoute) -> ModelRoute:
        """The route with the URLs to call: an http route as configured; an embedded one with its
        server's, started by the first call (`ModelUnavailable`, a `ModelError`, when it cannot be)."""
        if route.kind != "embedded":
            return route
        key = (route.model, route.context_window)
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if key in self._failed:
                raise self._failed[key]
            server = self._servers.get(key)
            if server is None or not server.running():
                try:
                    server = await self._start(route)
                except ModelUnavailable as exc:
                    self._failed[key] = exc
                    raise
                self._servers[key] = server
        return route.model_copy(update={"base_url": server.url, "tokenizer_url": server.root_url})

    async def _start(self, route: ModelRoute) -> embedded.LlamaServer:
        from wake.model import embedded

        cache = embedded.default_cache_dir()
        problem = embedded.not_fetched(cache, route.model)
        if problem is not None:
            raise problem
        work = self._embedded_dir
        if work is None:
            work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="wake-llama-"))
            self._temporary.append(work)
        server = embedded.LlamaServer(
            work, binary=embedded.server_binary(cache), model=embedded.model_file(cache, route.model), ctx=route.context_window,
            chat_template=embedded.tool_template(cache),
        )
        started = clock.monotonic_ms()
        server.launch()  # on the loop's thread (the main one): the server dies with this process
        try:
            await asyncio.to_thread(server.wait_ready, EMBEDDED_START_S)
        except BaseException:
            await asyncio.to_thread(server.stop)
            raise
        log.info("model.embedded_started", model=route.model, port=server.port, pid=server.pid, ctx=route.context_window,
                 latency_ms=round(clock.monotonic_ms() - started, 1), log_path=str(server.log_path))
        return server

    async def complete(self, route: ModelRoute, body: Mapping[str, Any], *, api_key: secrets.Secret | None = None) -> Reply:
        """POST one chat completion, retrying as the module docstring says."""
        route = await self.where(route)
        url = route.url().rstrip("/") + "/chat/completions"
        headers = {"content-type": "application/json"}
        if api_key is not None:
            headers["authorization"] = f"Bearer {api_key.reveal()}"
        extra = {k: v for k, v in route.extra_body.items() if k not in body and k not in HARNESS_BODY_KEYS}
        payload = json.dumps({"model": route.model, **body, **extra}, ensure_ascii=False).encode("utf-8")
        import httpx

        timeout = httpx.Timeout(route.timeout_s, connect=min(CONNECT_TIMEOUT_S, route.timeout_s))
        started = clock.monotonic_ms()
        attempts = 0
        errors: list[str] = []

        retrying = _retrying(route, errors)
        with tracing.chat_span(model=route.model, base_url=route.url(), body=body) as span:
            try:
                async for attempt in retrying:
                    with attempt:
                        attempts += 1
                        try:
                            message, finish, usage, answered = await self._attempt(url, headers, payload, timeout, route)
                        except Failure as exc:
                            errors.append(str(exc))
                            raise
            except Failure as exc:
                same = errors.count(str(exc))
                repeated = f" (the same error on {same} of {attempts} attempts)" if attempts > 1 else ""
                raise ModelError(
                    f"model {route.model} at {logs.redact_text(route.url())}: {exc}{repeated}", status=exc.status, attempts=attempts,
                    same_error=same,
                ) from exc
            tool_calls = message.get("tool_calls") or []
            content = message.get("content")
            reply = Reply(
                content=content if isinstance(content, str) else None, tool_calls=list(tool_calls) if isinstance(tool_calls, list) else [],
                finish_reason=finish, usage=usage, attempts=attempts, latency_ms=clock.monotonic_ms() - started,
                response_model=_text(answered.get("model")), response_id=_text(answered.get("id")),
            )
            tracing.chat_reply(
                span, response_model=reply.response_model, response_id=reply.response_id, finish_reason=finish,
                input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens, message=message,
            )
            return reply

    async def _attempt(
        self, url: str, headers: dict[str, str], payload: bytes, timeout: httpx.Timeout, route: ModelRoute
    ) -> tuple[dict[str, Any], str | None, Usage, dict[str, Any]]:
        """One attempt: the message, finish reason and usage (`parse`), and the whole 200 body."""
        import httpx

        request = self.http.build_request("POST", url, headers=headers, content=payload, timeout=timeout)
        try:
            response = await self.http.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise Failure(f"timed out after {route.timeout_s}s ({type(exc).__name__})", status=None, retryable=True) from exc
        except httpx.TransportError as exc:
            raise Failure(f"transport error: {type(exc).__name__}: {exc}", status=None, retryable=True) from exc
        try:
            try:
                raw = await response.aread()
            except httpx.TimeoutException as exc:
                raise Failure(f"timed out reading the response after {route.timeout_s}s", status=None, retryable=True) from exc
            except httpx.TransportError as exc:
                raise Failure(f"transport error reading the response: {type(exc).__name__}", status=None, retryable=True) from exc
            status = response.status_code
            if status != 200:
                detail = raw[:ERROR_BODY_MAX_CHARS].decode("utf-8", "replace")
                raise Failure(
                    f"HTTP {status}: {detail}", status=status, retryable=is_retryable_status(status),
                    wait_s=retry_after_s(response.headers) if is_retryable_status(status) else None,
                )
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise Failure(f"malformed response: not JSON ({exc})", status=None, retryable=False) from exc
            return (*parse(route, body), body if isinstance(body, dict) else {})
        finally:
            await response.aclose()  # before any retry: the connection goes back to the pool

    async def count_prompt_tokens(self, route: ModelRoute, body: Mapping[str, Any], *, api_key: secrets.Secret | None = None) -> int | None:
        """The tokens the prompt of `body` renders to, by the route's llama.cpp server: its chat
        template over the messages and tools (`/apply-template`), then its tokenizer (`/tokenize`).
        None when the route names no `tokenizer_url` or the server could not say (logged)."""
        route = await self.where(route)
        if route.tokenizer_url is None:
            return None
        import httpx  # imported where a call is made: a command that makes none does not pay for it

        root = route.tokenizer_url.rstrip("/")
        headers = {"content-type": "application/json"}
        if api_key is not None:
            headers["authorization"] = f"Bearer {api_key.reveal()}"
        timeout = httpx.Timeout(route.timeout_s, connect=min(CONNECT_TIMEOUT_S, route.timeout_s))
        try:
            rendered = await self.http.post(f"{root}/apply-template", json=dict(body), headers=headers, timeout=timeout)
            rendered.raise_for_status()
            prompt_text = rendered.json()["prompt"]
            counted = await self.http.post(
                f"{root}/tokenize", json={"content": prompt_text, "add_special": True, "parse_special": True}, headers=headers, timeout=timeout,
            )
            counted.raise_for_status()
            tokens = counted.json()["tokens"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            log.warning(
                "model.count_failed", model=route.model, tokenizer_url=logs.redact_text(root), error=logs.redact_text(f"{type(exc).__name__}: {exc}")
            )
            return None
        if not isinstance(tokens, list) or not isinstance(prompt_text, str):
            log.warning("model.count_failed", model=route.model, tokenizer_url=logs.redact_text(root), error="unexpected answer")
            return None
        return len(tokens)


def _retrying(route: ModelRoute, errors: list[str]) -> tenacity.AsyncRetrying:
    """The retry policy of one completion: a retryable `Failure` again, its hinted wait or a jittered backoff, capped;
    each retry logged with how often the same error came (`errors`: every attempt's error so far)."""

    def wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hinted = exc.wait_s if isinstance(exc, Failure) else None
        if hinted is None:
            hinted = random.uniform(0, BACKOFF_BASE_S * 2 ** (state.attempt_number - 1))
        return min(hinted, route.retry_cap_s)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "model.retry", model=route.model, attempt=state.attempt_number, status=getattr(exc, "status", None),
            error=logs.redact_text(str(exc)), same_error=errors.count(str(exc)), wait_s=round(state.upcoming_sleep, 3),
        )

    return tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, Failure) and e.retryable),
        stop=tenacity.stop_after_attempt(route.max_retries + 1),
        wait=wait,
        before_sleep=before_sleep,
        sleep=asyncio.sleep,
        reraise=True,
    )
