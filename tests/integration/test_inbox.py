"""The daemon's inbox over real HTTP (uvicorn on loopback, real PostgreSQL): a signed message is
stored verbatim in human_contact and can wake the agent once per interval; a replay, a bad or
missing signature, an oversized body, an unknown agent and a malformed body are each a 4xx with a
reason, and store nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from ledgers import contact
from tests.support import agents as agent_configs
from tests.support import sessions
from wake import stores
from wake.config import Config
from wake.daemon import inbox
from wake.errors import ListenError

SECRET = "inbox-secret-5b1e0c9a"
AGENTS = agent_configs.toml(tiers={"whisper": agent_configs.whisper("15m"), "surface": 'every = "1h"\nbinds = ["wake.surface"]'}, timezone="UTC")


def _config(store_config: Callable[..., Config], more: str = "") -> Config:
    return store_config(f'[inbox]\nlisten = "127.0.0.1:0"\nmax_body_bytes = 4096\nmax_skew_s = 60\n{more}', agents=AGENTS)


@asynccontextmanager
async def _serving(config: Config, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[httpx.AsyncClient, stores.Stores]]:
    monkeypatch.setenv("WAKE_INBOX_SECRET", SECRET)
    async with sessions.ready_stores(config) as st:
        endpoint = inbox.Endpoint.open(lambda: config, st)
        stop = asyncio.Event()
        served = asyncio.create_task(endpoint.serve(stop))
        try:
            async with httpx.AsyncClient(base_url=endpoint.url, timeout=30) as client:
                for _ in range(300):  # bounded: the server answers once uvicorn has started on the socket
                    try:
                        await client.get("/")
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.05)
                yield client, st
        finally:
            stop.set()
            await asyncio.wait_for(served, 30)


def _signed(doc: dict[str, Any] | bytes, *, secret: str = SECRET, at: float | None = None) -> tuple[bytes, dict[str, str]]:
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    stamp = str(int(time.time() if at is None else at))
    return body, {"content-type": "application/json", inbox.TIMESTAMP_HEADER: stamp, inbox.SIGNATURE_HEADER: inbox.signature(secret, stamp, body)}


def _message(key: str = "tg:1001", text: str = "Ship it on Friday, not Thursday.\n  — and tell Ada.", **more: Any) -> dict[str, Any]:
    return {"agent": "demo", "author": "Ada", "channel": "telegram", "text": text, "idempotency_key": key, **more}


async def _contacts(st: stores.Stores) -> list[dict[str, Any]]:
    async with st.pg_conn() as conn:
        return [dict(r) for r in await conn.fetch("SELECT message_id, agent_id, author, channel, body, idempotency_key FROM human_contact")]


async def _oneshots(st: stores.Stores) -> list[dict[str, Any]]:
    async with st.pg_conn() as conn:
        return [dict(r) for r in await conn.fetch("SELECT agent_id, tier, created_by, note FROM wake_oneshots ORDER BY created_at")]


async def test_a_signed_message_is_stored_verbatim_and_a_replay_of_its_key_is_refused(
    store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _config(store_config)
    async with _serving(config, monkeypatch) as (client, st):
        body, headers = _signed(_message())
        first = await client.post("/messages", content=body, headers=headers)
        replay = await client.post("/messages", content=body, headers=headers)  # the same request again, inside the window
        stored = await _contacts(st)
        async with st.pg_conn() as conn:
            last = await contact.last_received(conn, "demo")  # what the posture block and the gate read
    assert first.status_code == 201, first.text
    message_id = first.json()["message_id"]
    assert first.json()["wake_id"] is None  # no wake_tier: the message waits for the next wake
    assert replay.status_code == 409 and replay.json()["message_id"] == message_id and "already recorded" in replay.json()["error"]
    assert [(str(s["message_id"]), s["author"], s["channel"], s["body"], s["idempotency_key"]) for s in stored] == [
        (message_id, "Ada", "telegram", "Ship it on Friday, not Thursday.\n  — and tell Ada.", "tg:1001")]
    assert last is not None and abs((last - dt.datetime.now(dt.UTC)).total_seconds()) < 120


async def test_unsigned_badly_signed_stale_oversized_unknown_and_malformed_requests_store_nothing(
    store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _config(store_config)
    async with _serving(config, monkeypatch) as (client, st):
        answers: dict[str, httpx.Response] = {}
        body, headers = _signed(_message("k-unsigned"))
        answers["unsigned"] = await client.post("/messages", content=body, headers={"content-type": "application/json"})
        body, headers = _signed(_message("k-bad"), secret="not-the-secret")
        answers["bad signature"] = await client.post("/messages", content=body, headers=headers)
        body, headers = _signed(_message("k-tampered"))
        answers["tampered"] = await client.post("/messages", content=body.replace(b"Friday", b"Monday"), headers=headers)
        body, headers = _signed(_message("k-stale"), at=time.time() - 3600)  # a request captured an hour ago, sent again
        answers["replayed"] = await client.post("/messages", content=body, headers=headers)
        body, headers = _signed(_message("k-big", text="x" * 5000))
        answers["oversized"] = await client.post("/messages", content=body, headers=headers)

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b"y" * 1000

        stamp = str(int(time.time()))
        answers["oversized, streamed"] = await client.post("/messages", content=chunks(), headers={
            inbox.TIMESTAMP_HEADER: stamp, inbox.SIGNATURE_HEADER: "sha256=00"})
        body, headers = _signed(_message("k-who", agent="nobody"))
        answers["unknown agent"] = await client.post("/messages", content=body, headers=headers)
        body, headers = _signed(b"[1, 2]")
        answers["not an object"] = await client.post("/messages", content=body, headers=headers)
        body, headers = _signed({"agent": "demo", "author": "Ada", "text": "no key"})
        answers["no key"] = await client.post("/messages", content=body, headers=headers)
        answers["wrong method"] = await client.get("/messages")
        stored = await _contacts(st)
    statuses = {what: r.status_code for what, r in answers.items()}
    assert statuses == {
        "unsigned": 401, "bad signature": 401, "tampered": 401, "replayed": 401, "oversized": 413, "oversized, streamed": 413,
        "unknown agent": 404, "not an object": 400, "no key": 400, "wrong method": 405,
    }
    reasons = {what: r.json()["error"] for what, r in answers.items() if what != "wrong method"}
    assert "unsigned" in reasons["unsigned"] and "does not match" in reasons["bad signature"]
    assert "replayed" in reasons["replayed"] and "4096 bytes" in reasons["oversized"] and "'nobody'" in reasons["unknown agent"]
    assert "idempotency_key" in reasons["no key"]
    assert stored == []


async def test_a_message_wakes_the_agent_once_per_interval(store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(store_config, 'wake_tier = "surface"\nwake_min_interval_s = 600\n')
    async with _serving(config, monkeypatch) as (client, st):
        first = await client.post("/messages", content=(s := _signed(_message("m-1")))[0], headers=s[1])
        second = await client.post("/messages", content=(s := _signed(_message("m-2", text="And one more thing.")))[0], headers=s[1])
        shots = await _oneshots(st)
        stored = await _contacts(st)
    assert first.status_code == 201 and second.status_code == 201
    assert first.json()["wake_id"] is not None and second.json()["wake_id"] is None and "within wake_min_interval_s" in second.json()["wake"]
    assert [(s["agent_id"], s["tier"], s["created_by"]) for s in shots] == [("demo", "surface", "inbox")]
    assert first.json()["message_id"] in shots[0]["note"]
    assert sorted(s["idempotency_key"] for s in stored) == ["m-1", "m-2"]  # both messages are kept; only the wake is limited


async def test_the_endpoint_will_not_start_without_its_secret(store_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAKE_INBOX_SECRET", raising=False)
    config = _config(store_config)
    async with stores.connected(config) as st:
        with pytest.raises(ListenError) as refused:
            inbox.Endpoint.open(lambda: config, st)
    assert "wake_inbox_secret" in str(refused.value) and "$WAKE_INBOX_SECRET" in str(refused.value)
