"""Poison input at the inbox (issue 41): a signed message with a NUL in its text, author or key, a
lone surrogate, 60 KB of nested `[`, and an unsigned request whose X-Wake-Signature holds a
non-ASCII byte are each a 4xx with one reason (each was a 500 before, which a relay retries for
ever), and store nothing. A property test then drives the endpoint (real uvicorn, real
PostgreSQL) with generated bodies and headers, signed and not: never a 5xx, and a row is stored
only for a 201."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.integration.test_inbox import AGENTS, _contacts, _message, _serving, _signed
from wake.config import Config
from wake.daemon import inbox


async def test_nul_surrogate_nesting_and_a_non_ascii_signature_are_each_a_4xx_that_stores_nothing(
    store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = store_config('[inbox]\nlisten = "127.0.0.1:0"\nmax_body_bytes = 100000\nmax_skew_s = 60\n', agents=AGENTS)
    async with _serving(config, monkeypatch) as (client, stores):
        answers: dict[str, httpx.Response] = {}
        for field in ("text", "author", "idempotency_key"):
            body, headers = _signed(_message(f"k-nul-{field}", **{field: "a\u0000b"}))
            answers[f"NUL in {field}"] = await client.post("/messages", content=body, headers=headers)
        body, headers = _signed(b'{"agent": "demo", "author": "Ada", "text": "half \\ud800 a pair", "idempotency_key": "k-sur"}')
        answers["lone surrogate"] = await client.post("/messages", content=body, headers=headers)
        body, headers = _signed(b"[" * 60_000)
        answers["nested"] = await client.post("/messages", content=body, headers=headers)
        body, _ = _signed(_message("k-sig"))
        answers["non-ASCII signature"] = await client.post("/messages", content=body, headers=[
            (b"content-type", b"application/json"), (inbox.TIMESTAMP_HEADER.encode(), str(int(time.time())).encode()),
            (inbox.SIGNATURE_HEADER.encode(), b"sha256=\xff\xfe"),
        ])
        stored = await _contacts(stores)
    statuses = {what: r.status_code for what, r in answers.items()}
    assert statuses == {
        "NUL in text": 400, "NUL in author": 400, "NUL in idempotency_key": 400, "lone surrogate": 400, "nested": 400,
        "non-ASCII signature": 401,
    }, {what: r.text[:200] for what, r in answers.items()}
    reasons = {what: r.json()["error"] for what, r in answers.items()}
    assert "NUL" in reasons["NUL in text"] and "'author'" in reasons["NUL in author"] and "surrogate" in reasons["lone surrogate"]
    assert "nested too deeply" in reasons["nested"] and "non-ASCII" in reasons["non-ASCII signature"]
    assert stored == []


# any code point, surrogates and NUL included
_ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
_FIELD = st.one_of(st.text(_ANY_CHAR, max_size=40), st.integers(), st.none(), st.lists(st.integers(), max_size=3), st.just("demo"))
_DOC = st.fixed_dictionaries(
    {"agent": st.one_of(st.just("demo"), _FIELD), "author": _FIELD, "text": _FIELD, "idempotency_key": _FIELD},
    optional={"channel": _FIELD, "extra": _FIELD},
)
_HEADER_BYTES = st.binary(min_size=1, max_size=40).map(lambda b: bytes(c for c in b if 0x21 <= c <= 0x7E or c >= 0x80) or b"x")
_BODY = st.one_of(
    _DOC.map(lambda d: ("signed", json.dumps(d).encode())),  # surrogates go as \\u escapes, as a JSON sender writes them
    st.binary(max_size=300).map(lambda b: ("signed", b)),
    st.integers(min_value=1, max_value=30_000).map(lambda n: ("signed", b"[" * n + b"]" * (n % 3))),
    st.tuples(st.sampled_from([inbox.SIGNATURE_HEADER, inbox.TIMESTAMP_HEADER, "content-type", "x-forwarded-for"]), _HEADER_BYTES).map(
        lambda h: ("header", h)),
)


def test_generated_bodies_and_headers_never_get_a_5xx_and_store_only_on_201(
    store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = store_config('[inbox]\nlisten = "127.0.0.1:0"\nmax_body_bytes = 100000\nmax_skew_s = 60\n', agents=AGENTS)
    loop = asyncio.new_event_loop()
    serving = _serving(config, monkeypatch)
    client, stores = loop.run_until_complete(serving.__aenter__())
    seen: list[int] = []
    try:
        @settings(max_examples=150)
        @given(case=_BODY)
        def check(case: tuple[str, Any]) -> None:
            async def post() -> tuple[int, str, int, int]:
                before = len(await _contacts(stores))
                kind, value = case
                if kind == "signed":
                    body, headers = _signed(value)
                    answer = await client.post("/messages", content=body, headers=headers)
                else:
                    name, raw = value
                    body, signed = _signed(_message(f"k-h-{time.monotonic_ns()}"))
                    headers_list = [(k.encode(), v.encode()) for k, v in signed.items() if k.lower() != name.lower()] + [(name.encode(), raw)]
                    answer = await client.post("/messages", content=body, headers=headers_list)
                return answer.status_code, answer.text, before, len(await _contacts(stores))

            status, text, before, after = loop.run_until_complete(post())
            seen.append(status)
            assert status < 500, text[:300]
            assert after == before + (1 if status == 201 else 0), (status, text[:300])
            if status != 201:
                assert "error" in json.loads(text) or status == 405

        check()
    finally:
        loop.run_until_complete(serving.__aexit__(None, None, None))
        loop.close()
    assert any(400 <= s < 500 for s in seen)
