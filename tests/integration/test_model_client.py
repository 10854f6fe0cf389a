"""The model client against the scripted server on loopback: retries, waits, errors, usage, keep-alive."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.openai_server import Response, ScriptedServer, completion, error
from wake.config import ModelRoute
from wake.think.client import Client, ModelError


@pytest.fixture
def openai_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


BODY: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}


def _route(server: ScriptedServer, **kw: Any) -> ModelRoute:
    return ModelRoute(**{"base_url": server.url, "model": "scripted-1", "timeout_s": 2, "max_retries": 2, "retry_cap_s": 5, **kw})


async def _complete(route: ModelRoute) -> Any:
    client = Client()
    try:
        return await client.complete(route, BODY)
    finally:
        await client.aclose()


async def test_429_with_retry_after_seconds_is_honoured_and_the_wait_measured(openai_server: ScriptedServer) -> None:
    openai_server.push(error(429, "slow down", retry_after="1"), completion("ok"))
    reply = await _complete(_route(openai_server))
    assert reply.content == "ok" and reply.attempts == 2
    first, second = openai_server.requests
    waited = second.at - first.at
    assert 1.0 <= waited < 4.5, waited  # Retry-After honoured; below the 5 s cap (generous: a loaded machine stretches waits)


async def test_retry_after_ms_wins_and_the_cap_bounds_any_wait(openai_server: ScriptedServer) -> None:
    openai_server.push(error(503, retry_after_ms="250", retry_after="30"), completion("ok"))
    reply = await _complete(_route(openai_server))
    waited = openai_server.requests[1].at - openai_server.requests[0].at
    assert reply.attempts == 2 and 0.25 <= waited < 10, waited  # the 250 ms, not the 30 s
    openai_server.push(error(429, retry_after="3600"), completion("ok"))
    started = time.monotonic()
    reply = await _complete(_route(openai_server, retry_cap_s=0.3))
    assert reply.content == "ok" and 0.3 <= time.monotonic() - started < 30  # the 0.3 s cap, not the hour


async def test_500_then_success(openai_server: ScriptedServer) -> None:
    openai_server.push(error(500, "boom"), completion("recovered", cost=0.0002))
    reply = await _complete(_route(openai_server))
    assert (reply.content, reply.attempts, len(openai_server.requests)) == ("recovered", 2, 2)
    assert reply.usage.cost_reported and reply.usage.cost_usd == 0.0002


async def test_other_4xx_is_never_retried(openai_server: ScriptedServer) -> None:
    openai_server.push(error(400, "bad request: unknown field"), completion("never reached"))
    with pytest.raises(ModelError, match="HTTP 400") as caught:
        await _complete(_route(openai_server))
    assert caught.value.status == 400 and caught.value.attempts == 1
    assert len(openai_server.requests) == 1


async def test_retries_run_out_into_a_model_error(openai_server: ScriptedServer) -> None:
    openai_server.push(*[error(502, retry_after_ms="10")] * 3, completion("too late"))
    with pytest.raises(ModelError, match="HTTP 502") as caught:
        await _complete(_route(openai_server, max_retries=2))
    assert caught.value.attempts == 3 and len(openai_server.requests) == 3


async def test_an_error_inside_a_200_body_is_a_failure_retried_when_its_code_is(openai_server: ScriptedServer) -> None:
    openai_server.push(Response(body={"error": {"code": 429, "message": "upstream rate limited"}}), completion("fine"))
    reply = await _complete(_route(openai_server, retry_cap_s=0.05))
    assert reply.content == "fine" and reply.attempts == 2
    openai_server.push(Response(body={"error": {"code": 401, "message": "no credits"}}), completion("not this"))
    with pytest.raises(ModelError, match="provider error in a 200 body .*no credits"):
        await _complete(_route(openai_server))
    assert len(openai_server.requests) == 3  # the 401 was not retried


async def test_finish_reason_error_is_a_failure_not_an_empty_success(openai_server: ScriptedServer) -> None:
    broken = completion(None, finish_reason="error")
    openai_server.push(broken, broken, broken)
    with pytest.raises(ModelError, match="mid-generation"):
        await _complete(_route(openai_server, max_retries=2, retry_cap_s=0.05))
    assert len(openai_server.requests) == 3


async def test_a_timeout_is_retried_then_fails(openai_server: ScriptedServer) -> None:
    openai_server.push(Response(body=completion("late").body, delay_s=60), Response(body=completion("late").body, delay_s=60))
    started = time.monotonic()
    with pytest.raises(ModelError, match="timed out"):
        await _complete(_route(openai_server, timeout_s=0.3, max_retries=1, retry_cap_s=0.05))
    elapsed = time.monotonic() - started
    assert len(openai_server.requests) == 2 and 0.6 <= elapsed < 30, elapsed  # two 0.3 s timeouts, not the 60 s answers


async def test_a_timeout_then_success(openai_server: ScriptedServer) -> None:
    openai_server.push(Response(body=completion("late").body, delay_s=1.0), completion("on time"))
    reply = await _complete(_route(openai_server, timeout_s=0.3, retry_cap_s=0.05))
    assert reply.content == "on time" and reply.attempts == 2


async def test_a_malformed_body_fails_without_retry(openai_server: ScriptedServer) -> None:
    openai_server.push(Response(body=b"<html>gateway</html>"), completion("no"))
    with pytest.raises(ModelError, match="not JSON"):
        await _complete(_route(openai_server))
    assert len(openai_server.requests) == 1


async def test_usage_cached_tokens_and_computed_cost_and_keep_alive(openai_server: ScriptedServer) -> None:
    route = _route(openai_server, input_usd_per_mtok=2.0, cached_input_usd_per_mtok=0.5, output_usd_per_mtok=8.0)
    client = Client()
    try:
        first = await client.complete(route, BODY)
        second = await client.complete(route, BODY)
    finally:
        await client.aclose()
    assert first.usage.cached_tokens == 0 and not first.usage.cost_reported
    u = second.usage
    assert u.cached_tokens == u.prompt_tokens > 0  # an identical body: all of it "cached"
    assert u.cost_usd == pytest.approx((u.cached_tokens * 0.5 + u.completion_tokens * 8.0) / 1e6)
    assert openai_server.requests[0].client == openai_server.requests[1].client  # one kept-alive connection
    assert openai_server.requests[0].json["model"] == "scripted-1"


async def test_the_api_key_is_sent_as_a_bearer_token(openai_server: ScriptedServer) -> None:
    from wake.secrets import Secret

    client = Client()
    try:
        await client.complete(_route(openai_server), BODY, api_key=Secret("sk-test-abcdefgh1234", "test"))
    finally:
        await client.aclose()
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-test-abcdefgh1234"
