"""The console's guard (docs/console.md, "Safety"): who may read, who may act, and the start-up
refusal of an address other than loopback without a token."""

from __future__ import annotations

from pathlib import Path

import pytest

from wake.console.guard import Guard, is_loopback
from wake.observe.metrics import ListenError
from wake.secrets import Secret

NOW_S = 1_000_000.0  # the console's clock (seconds), as its app passes it
TOKEN = "s3cret-console-token"


def _guard(*, token: str | None = TOKEN, loopback: bool = True, read_only: bool = False) -> Guard:
    return Guard(token=Secret(token, "test") if token else None, loopback=loopback, read_only=read_only, token_source="test")


@pytest.fixture
def no_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))  # empty: no credential
    monkeypatch.delenv("WAKE_CONSOLE_TOKEN", raising=False)


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("::1", True), ("localhost", True), ("127.3.2.1", True),
                                                 ("0.0.0.0", False), ("192.168.1.4", False), ("example.org", False)])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_an_address_other_than_loopback_needs_a_token(no_token: None) -> None:
    with pytest.raises(ListenError, match="0.0.0.0:8087, which is not loopback: it needs a token"):
        Guard.for_listen("0.0.0.0:8087", token_credential="wake_console_token", read_only=False)
    g = Guard.for_listen("127.0.0.1:8087", token_credential="wake_console_token", read_only=False)
    assert g.token is None and g.may_read(sid=None, bearer=False)
    refusal = g.may_act(sid=None, bearer=False, csrf=None, origin=None, host="127.0.0.1:8087")
    assert refusal is not None and refusal.status == 403 and "none is set" in refusal.why


def test_the_token_comes_from_a_systemd_credential_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "wake_console_token").write_text(TOKEN + "\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    monkeypatch.setenv("WAKE_CONSOLE_TOKEN", "from-the-environment")
    g = Guard.for_listen("[::]:8087", token_credential="wake_console_token", read_only=False)
    assert g.token is not None and g.token.reveal() == TOKEN and not g.loopback
    assert not g.may_read(sid=None, bearer=False)  # off loopback, every page needs the token
    assert g.may_read(sid=None, bearer=g.bearer_ok(f"Bearer {TOKEN}"))


def test_a_session_is_signed_with_the_token_and_a_forged_one_is_not_a_session() -> None:
    g = _guard()
    cookie = g.new_session(NOW_S)
    sid = g.session_id(cookie, NOW_S)
    assert sid is not None and TOKEN not in cookie
    assert g.session_id(sid + "." + "0" * 64, NOW_S) is None and g.session_id(sid, NOW_S) is None and g.session_id(None, NOW_S) is None
    assert _guard(token="another-token").session_id(cookie, NOW_S) is None  # a new token ends every session


def test_an_action_needs_the_session_its_csrf_token_and_the_same_origin() -> None:
    g = _guard()
    sid = g.session_id(g.new_session(NOW_S), NOW_S)
    assert sid is not None
    host = "127.0.0.1:8087"
    ok = g.may_act(sid=sid, bearer=False, csrf=g.csrf_for(sid), origin=f"http://{host}", host=host)
    assert ok is None
    refusals = [
        g.may_act(sid=None, bearer=False, csrf=g.csrf_for(sid), origin=None, host=host),
        g.may_act(sid=sid, bearer=False, csrf=None, origin=None, host=host),
        g.may_act(sid=sid, bearer=False, csrf=g.csrf_for("another-session"), origin=None, host=host),
        g.may_act(sid=sid, bearer=False, csrf=g.csrf_for(sid), origin="http://evil.example", host=host),
        _guard(read_only=True).may_act(sid=sid, bearer=True, csrf=g.csrf_for(sid), origin=None, host=host),
    ]
    assert [r.status if r else None for r in refusals] == [403] * 5
    assert ["log in first" in refusals[0].why, "CSRF" in refusals[1].why, "CSRF" in refusals[2].why, "cross-origin" in refusals[3].why,
            "read-only" in refusals[4].why] == [True] * 5  # type: ignore[union-attr]
    assert g.may_act(sid=None, bearer=True, csrf=None, origin=None, host=host) is None  # a script with the token in its header
    assert not g.bearer_ok("Bearer wrong") and not g.bearer_ok(None) and not g.bearer_ok(TOKEN)
