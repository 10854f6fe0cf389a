"""Chat and mail channels: an outbox row sent through an Apprise route (docs/channels.md).

Apprise does the channels (Telegram, Slack, Discord, Matrix, ntfy, mail, its JSON webhook, ...);
this module resolves the route's URL from its credentials, renders the message, sends it in a
thread under the route's timeout, and says whether a failure is worth another attempt:

- **permanent** (dead-lettered at once): an HTTP 4xx other than 408, 425 and 429 (a revoked bot
  token is 401, a chat that does not exist 400), an SMTP 5xx reply, a login the server refuses
  or does not offer, a URL that does not parse as its channel's;
- **transient** (backed off and tried again): a 5xx, 408, 425, 429, an SMTP 4xx reply, a refused
  or dropped connection, a timeout, a missing credential, anything Apprise does not explain.

Apprise reports a failure only as the log lines of its attempt (`AppriseResult.logs()`); they are
captured at DEBUG, read for the status (`error=401`, `(550, ...)`), and never printed as they
are: what wake stores and logs is the redacted summary. The URL's secrets are registered with the
log redaction before any attempt: every credential read, and every part of the URL that Apprise's
own privacy form (`url(privacy=True)`) masks.

A channel that cannot deduplicate (all but Apprise's json/xml/form webhooks, which get the wake id
as `Idempotency-Key`) carries the wake id in its message, so a human can tell a resend.
"""

from __future__ import annotations

import asyncio
import logging
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from wake import logs, secrets
from wake.config import DEDUPLICATING_SCHEMES, Config, DeliveryRoute
from wake.config.channels import PLACEHOLDER, quiet_apprise, scheme_of
from wake.errors import ConfigError, DeliveryFailed

THREAD_MARGIN_S = 5.0  # the thread's own bound beyond Apprise's call deadline
CUT_MARK = "… [cut: {total} characters]"
_TRANSIENT_HTTP = frozenset({408, 425, 429})
_HTTP_STATUS = re.compile(r"\berror=(\d{3})\b")
_SMTP_REPLY = re.compile(r"\((\d{3}), b?['\"]")
_REFUSED_LOGIN = re.compile(r"auth(entication)? (extension not supported|failed|required)|unauthori[sz]ed|invalid (credentials|token)",
                            re.IGNORECASE)
_TOKEN = re.compile(r"[^/:@?&=#]+")


@dataclass(frozen=True, kw_only=True)
class Message:
    title: str
    body: str


def link_of(config: Config, wake_id: str) -> str:
    return config.console.wake_link(wake_id)


def fields_of(config: Config, payload: dict[str, object]) -> dict[str, str]:
    """The template's values for one delivery (docs/channels.md, "Templates")."""
    wake_id = str(payload.get("wake_id", ""))
    values = {k: str(payload.get(k) or "") for k in ("text", "agent", "tier", "trigger", "status", "settled_at")}
    return {**values, "wake_id": wake_id, "link": link_of(config, wake_id)}


def compose(route: DeliveryRoute, fields: dict[str, str], *, deduplicates: bool, body_max: int | None, title_max: int | None) -> Message:
    """The title and body, the body cut to the smaller of `max_chars` and the channel's own limit.

    The footer survives the cut: the wake id (unless the channel deduplicates or the template
    already shows it) and the console link (when set and the template does not show it)."""
    title = route.title.format_map(fields)
    head = route.template.format_map(fields)
    footer = []
    if not deduplicates and fields["wake_id"] not in head:
        footer.append(f"wake {fields['wake_id']}")
    if fields["link"] and fields["link"] not in head:
        footer.append(fields["link"])
    tail = "\n\n" + " · ".join(footer) if footer else ""
    limits = [n for n in (route.max_chars, body_max) if n]
    if title_max == 0 and limits:  # the channel has no title: Apprise puts it on the body's first line
        limits = [n - len(title) - 2 for n in limits]
    limit = min(limits) if limits else None
    if limit is not None and len(head) + len(tail) > limit:
        mark = CUT_MARK.format(total=len(head))
        head = head[: max(0, limit - len(tail) - len(mark))].rstrip() + mark
        if len(head) + len(tail) > limit:
            head, tail = (head + tail)[:limit], ""
    if title_max:
        title = title[:title_max]
    return Message(title=title, body=head + tail)


def resolved_url(route: DeliveryRoute) -> str:
    """The route's URL with its credentials in it. Raises DeliveryFailed naming a missing one."""
    if route.url_credential is not None:
        return _credential(route.url_credential)
    assert route.url is not None
    return PLACEHOLDER.sub(lambda m: _credential(m.group(1)), route.url)


def _credential(name: str) -> str:
    secret = secrets.read_secret(name)
    if secret is None:
        raise DeliveryFailed(f"credential {name!r} not found in $CREDENTIALS_DIRECTORY or ${secrets.env_name(name)}")
    return secret.reveal()


def _without_query(url: str) -> str:
    return url.split("?", 1)[0]


def shown_target(route: DeliveryRoute) -> str:
    """The route's target as `wake outbox` and the logs show it, without reading a secret: Apprise's
    privacy form of a literal URL, a placeholder URL as written (the placeholders are where the
    secrets go), or the credential that holds the URL. Never a query string."""
    if route.url_credential is not None:
        return f"(the URL in credential {route.url_credential})"
    url = route.url or ""
    if PLACEHOLDER.search(url):
        return logs.redact_text(_without_query(url))
    plugin = _instantiate(url)
    return _without_query(plugin.url(privacy=True)) if plugin is not None else f"{scheme_of(url)}://…"


def route_target(config: Config, name: str) -> str:
    """Where a route delivers, as `wake outbox` and the sender's log lines show it (redacted)."""
    route = config.delivery.get(name)
    if route is None:
        return "(no such route in the config)"
    if route.kind == "apprise":
        return shown_target(route)
    if route.kind == "webhook":
        return logs.redact_text(_without_query(route.url or ""))
    return str(config.config_relative(route.path)) if route.kind == "file" and route.path else route.kind


def _instantiate(url: str) -> Any:
    import apprise  # here, not at the top: a command that sends nothing never pays for Apprise's plugins

    quiet_apprise()
    return apprise.Apprise.instantiate(url)


def _register_masked(url: str, private: str) -> None:
    """Every part of `url` that Apprise's privacy form hides is a secret from now on."""
    for match in _TOKEN.finditer(url.split("://", 1)[-1]):
        token, after = match.group(), url.split("://", 1)[-1][match.end():match.end() + 1]
        if after != "=" and urllib.parse.unquote(token) not in urllib.parse.unquote(private):  # a query key is no secret
            logs.register_secret(token)
            logs.register_secret(urllib.parse.unquote(token))


@dataclass(frozen=True, kw_only=True)
class Target:
    plugin: object  # the Apprise service (apprise.plugins.NotifyBase)
    scheme: str
    shown: str  # its privacy form, without the query string

    @property
    def deduplicates(self) -> bool:
        return self.scheme in DEDUPLICATING_SCHEMES


def target_of(route: DeliveryRoute) -> Target:
    """The route's Apprise service, its secrets registered with the log redaction first. Raises DeliveryFailed."""
    url = resolved_url(route)
    plugin = _instantiate(url)
    if plugin is None:
        raise DeliveryFailed(f"{shown_target(route)} does not parse as an Apprise {scheme_of(url)} URL", permanent=True)
    private = plugin.url(privacy=True)
    _register_masked(url, private)
    return Target(plugin=plugin, scheme=scheme_of(url) or "", shown=_without_query(private))


def check_routes(config: Config) -> None:
    """At the daemon's start (and reload): every Apprise route's credentials resolve and its URL
    parses. Raises ConfigError (exit 78) with one line."""
    for name, route in config.delivery.items():
        if route.kind != "apprise":
            continue
        try:
            target_of(route)
        except DeliveryFailed as exc:
            raise ConfigError(str(config.path), f"delivery.{name}", str(exc)) from None


def permanent_http(status: int) -> bool:
    """An HTTP status that another attempt cannot change: a 4xx other than 408, 425 and 429."""
    return 400 <= status < 500 and status not in _TRANSIENT_HTTP


def failure_of(entries: list[tuple[str, str]]) -> DeliveryFailed:
    """What Apprise's captured lines (level, message) say of a failed attempt, redacted."""
    said = [m for level, m in entries if level in ("WARNING", "ERROR", "CRITICAL")]
    text = " ".join(said) or "the channel did not accept the message (Apprise gave no reason)"
    everything = " ".join(m for _, m in entries)
    permanent = False
    codes = [int(c) for c in _HTTP_STATUS.findall(everything)]
    if codes:
        permanent = permanent_http(codes[-1])
    elif (smtp := _SMTP_REPLY.findall(everything)):
        permanent = smtp[-1].startswith("5")
        text += f" (SMTP {smtp[-1]})"
    if _REFUSED_LOGIN.search(everything):
        permanent = True
        text += " (login refused)"
    return DeliveryFailed(logs.redact_text(text)[:500], permanent=permanent)


def _notify(plugin: Any, message: Message, timeout_s: float) -> tuple[bool, list[tuple[str, str]]]:
    import apprise

    quiet_apprise()
    result = apprise.Apprise(plugin).notify(
        body=message.body, title=message.title, body_format=apprise.NotifyFormat.TEXT, timeout=timeout_s, log_level=logging.DEBUG,
    )
    return bool(result), [(e.level, e.message) for e in result.logs()]


async def send(config: Config, route: DeliveryRoute, payload: dict[str, object], *, delivery_id: int) -> None:
    """One attempt through an Apprise route; raises DeliveryFailed (`permanent` when it says so)."""
    target = target_of(route)
    wake_id = str(payload.get("wake_id", ""))
    headers = getattr(target.plugin, "headers", None)
    if isinstance(headers, dict):  # the webhooks' HTTP headers, mail's message headers
        headers["X-Wake-Id"] = wake_id
        if target.deduplicates:
            headers.update({"Idempotency-Key": wake_id, "X-Wake-Delivery": str(delivery_id)})
    message = compose(
        route, fields_of(config, payload), deduplicates=target.deduplicates,
        body_max=getattr(target.plugin, "body_maxlen", None), title_max=getattr(target.plugin, "title_maxlen", None),
    )
    deadline_s = route.timeout_s + THREAD_MARGIN_S
    try:
        ok, entries = await asyncio.wait_for(asyncio.to_thread(_notify, target.plugin, message, route.timeout_s), deadline_s)
    except TimeoutError:
        raise DeliveryFailed(f"no answer from {target.shown} within {route.timeout_s:g} s") from None
    if not ok:
        raise failure_of(entries)
