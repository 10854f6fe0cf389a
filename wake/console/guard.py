"""Who may look and who may act (docs/console.md, "Safety").

- On a loopback address anyone on the machine may read; on any other address every page needs the
  token, and the console refuses to start without one.
- Every action needs the token (a signed session cookie from `/login`, or `Authorization: Bearer`)
  and, with the cookie, the form's CSRF token and a same-origin request; in read-only mode no
  action is offered or accepted.

The session cookie holds a random session id and its HMAC under the token, never the token; the
CSRF token is an HMAC of the session id. Changing the token ends every session. A session is also
held by the console itself (`Sessions`): it ends at logout, after `[console] session_ttl_s`, and
when the console restarts, so a cookie copied before any of these acts no more.

- Every request names a host the console answers to (`Host` allow-list): the listen address,
  `localhost`, `127.0.0.1`, `[::1]`, the host of `[console] url`, and `[console] hosts`. Any other
  is 421, so a page on another site that rebinds its name to 127.0.0.1 reads nothing.
- Failed logins are counted per client address (`Throttle`): the `FREE_FAILURES`-th locks the
  client out for `LOCK_S`, the right token included, and each failure after a lock-out doubles it
  (at most `MAX_LOCK_S`); each is logged.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from secrets import token_hex
from urllib.parse import urlsplit

from wake.config import parse_listen
from wake.errors import ListenError
from wake.secrets import Secret, env_name, read_secret

SESSION_COOKIE = "wake_console"
CSRF_FIELD = "csrf"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
ALWAYS_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})  # and the listen address's host, the url's, [console] hosts
MAX_SESSIONS = 1000  # the oldest session ends when one more is opened
FREE_FAILURES = 5  # failed logins per client before the lock-outs start
LOCK_S = 30.0
MAX_LOCK_S = 900.0
MAX_CLIENTS = 10_000  # clients whose failures are remembered (the oldest forgotten first)


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


def host_name(header: str | None) -> str | None:
    """The host of a `Host` header (`example.org:8087` -> `example.org`, `[::1]:8087` -> `::1`),
    lower-cased; None for a header that names none."""
    value = (header or "").strip().lower()
    if not value or not value.isascii():
        return None
    if value.startswith("["):
        host, sep, _ = value[1:].partition("]")
        return host if sep else None
    host, _, port = value.partition(":")
    return host if (not port or port.isdigit()) and host else None


class Sessions:
    """The sessions this console opened and has not ended: id -> when it expires (Unix seconds)."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._open: OrderedDict[str, float] = OrderedDict()

    def open(self, sid: str, now_s: float) -> None:
        self._open[sid] = now_s + self.ttl_s
        while len(self._open) > MAX_SESSIONS:
            self._open.popitem(last=False)

    def live(self, sid: str, now_s: float) -> bool:
        expires = self._open.get(sid)
        if expires is None:
            return False
        if now_s >= expires:
            del self._open[sid]
            return False
        return True

    def end(self, sid: str) -> None:
        self._open.pop(sid, None)


class Throttle:
    """Failed logins per client: `locked(client, now)` is the seconds it must still wait."""

    def __init__(self) -> None:
        self._failures: OrderedDict[str, tuple[int, float]] = OrderedDict()  # client -> (failures, locked until)

    def locked(self, client: str, now_s: float) -> float:
        _, until = self._failures.get(client, (0, 0.0))
        return max(0.0, until - now_s)

    def failed(self, client: str, now_s: float) -> int:
        """Count a failure; returns the client's failures so far."""
        failures, _ = self._failures.pop(client, (0, 0.0))
        failures += 1
        over = failures - FREE_FAILURES + 1  # the FREE_FAILURES-th failure starts the first lock-out
        until = now_s + min(MAX_LOCK_S, LOCK_S * 2 ** min(over - 1, 20)) if over > 0 else 0.0
        self._failures[client] = (failures, until)
        while len(self._failures) > MAX_CLIENTS:
            self._failures.popitem(last=False)
        return failures

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)


@dataclass(frozen=True)
class Guard:
    token: Secret | None
    loopback: bool
    read_only: bool
    token_source: str  # where the token is read from, for the pages that say how to get one
    hosts: frozenset[str] = ALWAYS_HOSTS  # the names a request's Host may give
    sessions: Sessions = field(default_factory=lambda: Sessions(12 * 3600.0))
    throttle: Throttle = field(default_factory=Throttle)

    @classmethod
    def for_listen(
        cls, listen: str, *, token_credential: str, read_only: bool, hosts: Iterable[str] = (), session_ttl_s: float = 12 * 3600.0,
    ) -> Guard:
        """The guard of a console on `listen`; raises ListenError (exit 78) for an address other
        than loopback with no token. `hosts`: the names besides the listen address's, localhost,
        127.0.0.1 and ::1 that a request's Host may give."""
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
        allowed = ALWAYS_HOSTS | {host.lower()} | {h.strip().lower().strip("[]") for h in hosts if h.strip()}
        return cls(token=token, loopback=loopback, read_only=read_only, token_source=source, hosts=frozenset(allowed),
                   sessions=Sessions(session_ttl_s))

    def host_refusal(self, header: str | None) -> Refusal | None:
        """None when the request's Host is one this console answers to, else a 421."""
        name = host_name(header)
        if name is not None and name in self.hosts:
            return None
        return Refusal(421, f"this console does not answer to the host {_clip(header or '')!r}: add it to [console] hosts to reach it by that name")

    # -- sessions -----------------------------------------------------------------------------------

    def _mac(self, message: str) -> str:
        assert self.token is not None
        return hmac.new(self.token.reveal().encode(), message.encode(), hashlib.sha256).hexdigest()

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode("utf-8", "surrogatepass"), self.token.reveal().encode())

    def new_session(self, now_s: float) -> str:
        sid = token_hex(16)
        self.sessions.open(sid, now_s)
        return f"{sid}.{self._mac('session|' + sid)}"

    def session_id(self, cookie: str | None, now_s: float) -> str | None:
        """The session id of a valid session cookie of a session still open, else None."""
        if self.token is None or not cookie or "." not in cookie or not cookie.isascii():
            return None
        sid, _, mac = cookie.partition(".")
        if not hmac.compare_digest(mac, self._mac("session|" + sid)):
            return None
        return sid if self.sessions.live(sid, now_s) else None

    def end_session(self, cookie: str | None, now_s: float) -> None:
        if (sid := self.session_id(cookie, now_s)) is not None:
            self.sessions.end(sid)

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
        if origin and _netloc(origin) != host:
            return Refusal(403, f"a cross-origin request ({_clip(origin)}) may not act")
        if not csrf or not csrf.isascii() or not hmac.compare_digest(csrf, self.csrf_for(sid)):
            return Refusal(403, "the form's CSRF token is missing or wrong: reload the page and try again")
        return None


def _netloc(url: str) -> str | None:
    try:
        return urlsplit(url).netloc
    except ValueError:  # `http://[not-an-address`
        return None


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else f"{text[:n]}… ({len(text)} chars)"
