"""What a timestamp authority answers is outside input: any bytes, a real token cut short or with
a byte changed, one over other data or for another request, is one `StoreUnavailable` line or a
token that verifies; nothing else escapes (`wake.witness.anchor.accepted`, and `check` over stored
tokens). The authority is real: `openssl ts -reply` with a CA made here (tests/support/tsa.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from hypothesis import given
from hypothesis import strategies as st
from rfc3161_client import HashAlgorithm, TimestampRequestBuilder
from rfc3161_client.tsp import TimeStampRequest

from tests.support import tsa
from wake.errors import StoreUnavailable
from wake.witness import anchor

DATA = anchor.message("demo", 3, "a" * 64)


@pytest.fixture(scope="module")
def answered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TimeStampRequest, bytes, list[x509.Certificate]]]:
    authority = tsa.make(tmp_path_factory.mktemp("anchor"))
    request = TimestampRequestBuilder().data(DATA).hash_algorithm(HashAlgorithm.SHA256).build()
    with tsa.serving(authority) as served:
        reply = httpx.post(served.url, content=request.as_bytes(), headers={"Content-Type": anchor.QUERY_TYPE}, timeout=60)
    yield request, reply.content, anchor.roots(Path(authority.ca))


def test_the_real_answer_is_a_token_and_not_for_other_data(answered: tuple[TimeStampRequest, bytes, list[x509.Certificate]]) -> None:
    request, good, roots = answered
    assert anchor.accepted(good, request, DATA, roots, tsa_url="t").response == good
    with pytest.raises(StoreUnavailable, match="not a valid token over the head"):
        anchor.accepted(good, request, anchor.message("demo", 4, "a" * 64), roots, tsa_url="t")
    other = TimestampRequestBuilder().data(DATA).hash_algorithm(HashAlgorithm.SHA256).build()  # another nonce
    with pytest.raises(StoreUnavailable):
        anchor.accepted(good, other, DATA, roots, tsa_url="t")


@given(cut=st.integers(min_value=0), at=st.integers(min_value=0), flip=st.integers(min_value=1, max_value=255), noise=st.binary(max_size=64))
def test_a_changed_answer_is_one_line_or_still_a_token(answered: tuple[TimeStampRequest, bytes, list[x509.Certificate]], cut: int, at: int,
                                                       flip: int, noise: bytes) -> None:
    request, good, roots = answered
    changed = bytearray(good[: cut % (len(good) + 1)] or good)
    changed[at % len(changed)] ^= flip
    for answer in (bytes(changed), noise, good[: cut % (len(good) + 1)]):
        try:
            token = anchor.accepted(answer, request, DATA, roots, tsa_url="http://127.0.0.1/t")
        except StoreUnavailable as exc:
            assert "\n" not in str(exc) and str(exc).startswith("timestamp authority unreachable at http://127.0.0.1/t: ")
            continue
        assert token.response == answer  # a byte the signature does not cover: what is kept is what verified
