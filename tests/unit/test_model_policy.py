"""The client's pure parts: Retry-After parsing, the retry decision, body parsing, cost."""

from __future__ import annotations

import datetime as dt

import pytest

from wake.config import ModelRoute
from wake.think import client as model
from wake.think import prompt

ROUTE = ModelRoute(base_url="http://127.0.0.1:1/v1", model="m", input_usd_per_mtok=3.0, output_usd_per_mtok=15.0, cached_input_usd_per_mtok=0.3)
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


def test_retry_after_in_ms_seconds_and_http_date() -> None:
    assert model.retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert model.retry_after_s({"retry-after": "7"}) == 7.0
    assert model.retry_after_s({"retry-after": "Sun, 29 Nov 2026 12:00:42 GMT"}, NOW) == 42.0
    assert model.retry_after_s({"retry-after": "Sun, 29 Nov 2026 11:00:00 GMT"}, NOW) == 0.0  # in the past
    assert model.retry_after_s({"retry-after": "soon"}) is None
    assert model.retry_after_s({}) is None


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(408, True), (409, True), (429, True), (500, True), (503, True), (400, False), (401, False), (403, False), (404, False), (422, False)],
)
def test_which_statuses_are_retried(status: int, retryable: bool) -> None:
    assert model.is_retryable_status(status) is retryable


def test_parse_refuses_error_bodies_and_non_completions() -> None:
    with pytest.raises(model.Failure, match="code 502") as caught:
        model.parse(ROUTE, {"error": {"code": "502", "message": "upstream"}})
    assert caught.value.retryable
    with pytest.raises(model.Failure) as caught:
        model.parse(ROUTE, {"error": {"code": 402, "message": "payment required"}})
    assert not caught.value.retryable
    with pytest.raises(model.Failure, match="no choices"):
        model.parse(ROUTE, {"choices": []})
    with pytest.raises(model.Failure, match="mid-generation"):
        model.parse(ROUTE, {"choices": [{"message": {"content": ""}, "finish_reason": "error"}]})


def test_usage_prefers_the_reported_cost_and_prices_cached_tokens() -> None:
    body = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 800}}}
    _, finish, usage = model.parse(ROUTE, body)
    assert finish == "stop" and (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (1000, 100, 800)
    assert usage.cost_usd == pytest.approx((200 * 3.0 + 800 * 0.3 + 100 * 15.0) / 1e6) and not usage.cost_reported
    reported = model.usage_of(ROUTE, {"usage": {**body["usage"], "cost": 0.0042}})
    assert reported.cost_usd == 0.0042 and reported.cost_reported


def test_shared_prefix_share() -> None:
    assert prompt.shared_prefix_share(b"abcdef", b"abcxyz") == 0.5
    assert prompt.shared_prefix_share(b"", b"") == 1.0
    assert prompt.shared_prefix_share(b"abc", b"abcdef") == 0.5
