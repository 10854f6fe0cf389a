"""Chat and mail channels through Apprise, against real receivers: a real SMTP server (aiosmtpd)
for mailto://, the loopback webhook receiver for Apprise's json://, both fed by a real wake's
settle and the daemon's sender; a permanent refusal dead-letters on the first attempt, a
transient one backs off; the URL's secrets appear in no row and no log line."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ledgers import outbox
from tests.support import agents as agent_configs
from tests.support import sending, wakes
from tests.support.openai_server import ScriptedServer, completion
from tests.support.smtp_server import SmtpServer
from tests.support.webhook_receiver import Receiver
from wake import logs, stores
from wake.config import Config
from wake.daemon import channels
from wake.errors import ConfigError
from wake.stores import prepared

TOKEN = "hook-token-7f3a9c21e5"  # the secret part of the json:// URL, from the environment


def _config(store_config: Callable[..., Config], server: ScriptedServer, routes: str, deliver_to: list[str], **environ: str) -> Config:
    extra = agent_configs.scripted(server.url) + f'\n[console]\nurl = "https://wake.example.org/"\n{routes}\n'
    surface = f'every = "1h"\nbinds = ["wake.surface"]\nmodel = "scripted"\ndeliver_to = {json.dumps(deliver_to)}'
    return store_config(extra, agents=agent_configs.toml(tiers={"surface": surface}, timezone="UTC"), **environ)


def _route(name: str, url: str, *, attempts: int = 3, more: str = "") -> str:
    return (f'[delivery.{name}]\nkind = "apprise"\nurl = "{url}"\ntimeout_s = 10\nmax_attempts = {attempts}\n'
            f"backoff_s = 0.01\nbackoff_max_s = 0.05\n{more}")


async def _rows(config: Config) -> list[dict[str, Any]]:
    async with stores.connected(config) as st, st.pg_conn() as conn:
        sql = "SELECT route, state, attempts, last_error, payload::text AS payload FROM wake_outbox ORDER BY route"
        return [dict(r) for r in await conn.fetch(sql)]


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    logs.configure("json", "debug", stream)
    yield stream
    logs.configure("json", "info")


async def test_a_wake_reaches_a_real_mailbox_and_a_json_webhook_once_each_with_the_secret_nowhere(
    store_config: Callable[..., Config], server: ScriptedServer, captured_logs: io.StringIO, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    with SmtpServer() as smtp, Receiver() as receiver:
        routes = _route("mail", smtp.url(), more='template = "{text}"\ntitle = "{agent}: {tier} report"\n') + _route(
            "hook", receiver.url.replace("http://", "json://") + "?token={hook_token}")
        config = _config(store_config, server, routes, ["mail", "hook"])
        server.push(completion("Two tickets need an answer today."))
        o = await wakes.once(config, tier="surface")
        assert await sending.send_due(config) == 2
        assert await sending.send_due(config) == 0  # sent once: nothing left to take
    assert o.status == "completed"
    assert len(smtp.messages) == 1 and smtp.envelopes == [("wake@example.org", ["human@example.org"])]
    mail = smtp.messages[0]
    assert mail["Subject"] == "demo: surface report" and mail["X-Wake-Id"] == str(o.wake_id)
    text = smtp.text_of(0)
    # mail cannot deduplicate: the wake id is in the message, with the console link
    assert text.startswith("Two tickets need an answer today.")
    assert f"wake {o.wake_id}" in text and f"https://wake.example.org/wakes/{o.wake_id}" in text
    assert len(receiver.requests) == 1 and receiver.acted_on == [str(o.wake_id)]
    hook = receiver.requests[0]
    assert hook.headers["idempotency-key"] == str(o.wake_id) and hook.json["message"].startswith("Two tickets need an answer today.")
    assert f"wake {o.wake_id}" not in hook.json["message"]  # a deduplicating channel keeps its message as written
    rows = await _rows(config)
    assert [(r["route"], r["state"], r["attempts"]) for r in rows] == [("hook", "sent", 1), ("mail", "sent", 1)]
    assert all(TOKEN not in r["payload"] and TOKEN not in (r["last_error"] or "") for r in rows)
    lines = [json.loads(x) for x in captured_logs.getvalue().splitlines() if x.startswith("{")]
    sent = [x for x in lines if x.get("event") == "outbox.sent"]
    assert {x["route"] for x in sent} == {"mail", "hook"} and TOKEN not in captured_logs.getvalue()
    assert {x["target"] for x in sent} == {receiver.url.replace("http://", "json://"), f"mailto://127.0.0.1:{smtp.port}/human%40example.org"}


async def test_a_permanent_refusal_dead_letters_on_the_first_attempt(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    with Receiver(refuse_with=401) as receiver, SmtpServer(refuse_rcpt="550 5.1.1 no such user") as smtp:
        routes = _route("hook", receiver.url.replace("http://", "json://"), attempts=5) + _route("mail", smtp.url(), attempts=5)
        config = _config(store_config, server, routes, ["hook", "mail"])
        server.push(completion("A report."))
        await wakes.once(config, tier="surface")
        await sending.send_due(config)
    rows = {r["route"]: r for r in await _rows(config)}
    assert (rows["hook"]["state"], rows["hook"]["attempts"]) == ("dead", 1) and "error=401" in rows["hook"]["last_error"]
    assert (rows["mail"]["state"], rows["mail"]["attempts"]) == ("dead", 1) and "SMTP 550" in rows["mail"]["last_error"]
    assert len(receiver.requests) == 1 and smtp.messages == []


async def test_a_login_the_server_refuses_is_permanent(
    store_config: Callable[..., Config], server: ScriptedServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAIL_PASSWORD", "pw-9d2e81c4")
    with SmtpServer() as smtp:
        config = _config(store_config, server, _route("mail", smtp.url(credentials="wake:{mail_password}@"), attempts=5), ["mail"])
        server.push(completion("A report."))
        await wakes.once(config, tier="surface")
        await sending.send_due(config)
    [row] = await _rows(config)
    assert (row["state"], row["attempts"]) == ("dead", 1) and "login refused" in row["last_error"]
    assert "pw-9d2e81c4" not in row["last_error"] and smtp.messages == []


async def test_a_transient_failure_backs_off_and_the_next_attempt_delivers(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    with Receiver(fail_first=2) as receiver:
        config = _config(store_config, server, _route("hook", receiver.url.replace("http://", "json://"), attempts=4), ["hook"])
        server.push(completion("A report."))
        o = await wakes.once(config, tier="surface")
        await sending.send_due(config)
    [row] = await _rows(config)
    assert (row["state"], row["attempts"]) == ("sent", 3) and len(receiver.requests) == 3
    assert receiver.acted_on == [str(o.wake_id)] and {r.headers["idempotency-key"] for r in receiver.requests} == {str(o.wake_id)}


async def test_a_long_text_is_cut_to_the_route_limit_and_keeps_its_wake_id(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    with SmtpServer() as smtp:
        config = _config(store_config, server, _route("mail", smtp.url(), more="max_chars = 300\n"), ["mail"])
        server.push(completion("word " * 400))
        o = await wakes.once(config, tier="surface")
        await sending.send_due(config)
    text = smtp.text_of(0).replace("\r\n", "\n").rstrip("\n")
    assert len(text) <= 300 and "[cut: 2000 characters]" in text and text.endswith(f"https://wake.example.org/wakes/{o.wake_id}")
    assert f"wake {o.wake_id}" in text


async def test_the_daemon_refuses_a_route_whose_credential_is_missing(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = _config(store_config, server, _route("tg", "tgram://{tg_token}/12345"), ["tg"])
    with pytest.raises(ConfigError) as refused:
        channels.check_routes(config)
    assert "delivery.tg" in str(refused.value) and "'tg_token' not found" in str(refused.value)


async def test_wake_outbox_lists_an_apprise_delivery_with_its_target_redacted(store_config: Callable[..., Config], server: ScriptedServer) -> None:
    config = _config(store_config, server, _route("tg", "tgram://{tg_token}/12345") + _route(
        "ntfy", "ntfys://wake:s3cr3t-passw0rd@ntfy.example.org/alerts"), ["tg", "ntfy"])
    async with stores.connected(config) as st, st.pg_conn() as conn:
        await prepared.prepare_schema(st)
        for route in ("tg", "ntfy"):
            await outbox.enqueue(conn, wake_id=uuid.uuid4(), route=route, agent_id="demo", tier="surface", payload={"text": "x"},
                                 at=dt.datetime.now(dt.UTC))
    shown = {name: channels.route_target(config, name) for name in ("tg", "ntfy")}
    assert shown["tg"] == "tgram://{tg_token}/12345"
    assert "s3cr3t-passw0rd" not in shown["ntfy"] and shown["ntfy"].startswith("ntfys://")


