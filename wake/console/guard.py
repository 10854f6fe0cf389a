"""Who may look and who may act (docs/console.md, "Safety").

- On a loopback address anyone on the machine may read; on any other address every page needs the
  token, and the console refuses to start without one.
- Every action needs the token (a signed session cookie from `/login`, or `Authorization: Bearer`)
  and, with the cookie, the form's CSRF token and a same-origin request; in read-only mode no
  action is offered or accepted.

The session cookie holds a random session id and its HMAC under the token, never the token; the
CSRF token is an HMAC of the session id. Changing the token ends every session.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets as random_tokens
from dataclasses import dataclass
from urllib.parse import urlsplit

from wake.config import parse_listen
from wake.errors import ListenError
from wake.secrets import Secret, env_name, read_secret

SESSION_COOKIE = "wake_console"
CSRF_FIELD = "csrf"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Refusal:
    """Why a request may not do what it asked: an HTTP status and one line."""

    status: int
    why: str


@dataclass(frozen=True)
class Guard:
    token: Secret | None
    loopback: bool
    read_only: bool
    token_source: str  # where the token is read from, for the pages that say how to get one

    @classmethod
    def for_listen(cls, listen: str, *, token_credential: str, read_only: bool) -> Guard:
        """The guard of a console on `listen`; raises ListenError (exit 78) for an address other
        than loopback with no token."""
        try:
            host, _port = parse_listen(listen)
        except ValueError as exc:
            raise ListenError(f"bad console listen address: {exc}") from None
        token = read_secret(token_credential)
        source = f"credential {token_credential} or ${env_name(token_credential)}"
        if token is not None and not token.reveal():
            token = None
        loopback = is_loopback(host)
        if not loopback and token is None:
            raise ListenError(f"the console listens on {listen}, which is not loopback: it needs a token ({source})")
        return cls(token=token, loopback=loopback, read_only=read_only, token_source=source)

    # -- sessions -----------------------------------------------------------------------------------

    def _mac(self, message: str) -> str:
        assert self.token is not None
        return hmac.new(self.token.reveal().encode(), message.encode(), hashlib.sha256).hexdigest()

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.reveal().encode())

    def new_session(self) -> str:
        sid = random_tokens.token_hex(16)
        return f"{sid}.{self._mac('session|' + sid)}"

    def session_id(self, cookie: str | None) -> str | None:
        """The session id of a valid session cookie, else None."""
        if self.token is None or not cookie or "." not in cookie:
            return None
        sid, _, mac = cookie.partition(".")
        return sid if hmac.compare_digest(mac, self._mac("session|" + sid)) else None

    def csrf_for(self, sid: str) -> str:
        return self._mac("csrf|" + sid)

    def bearer_ok(self, authorization: str | None) -> bool:
        scheme, _, value = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(value.strip())

    # -- decisions ----------------------------------------------------------------------------------

    def may_read(self, *, sid: str | None, bearer: bool) -> bool:
        return self.loopback or sid is not None or bearer

    def may_act(self, *, sid: str | None, bearer: bool, csrf: str | None, origin: str | None, host: str | None) -> Refusal | None:
        """None when an action may run, else why not."""
        if self.read_only:
            return Refusal(403, "the console is read-only ([console] read_only, or --read-only)")
        if self.token is None:
            return Refusal(403, f"actions need the console token, and none is set ({self.token_source})")
        if bearer:
            return None
        if sid is None:
            return Refusal(403, "actions need the console token: log in first")
        if origin and urlsplit(origin).netloc != host:
            return Refusal(403, f"a cross-origin request ({_clip(origin)}) may not act")
        if not csrf or not hmac.compare_digest(csrf, self.csrf_for(sid)):
            return Refusal(403, "the form's CSRF token is missing or wrong: reload the page and try again")
        return None


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else f"{text[:n]}… ({len(text)} chars)"
