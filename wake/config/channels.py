"""The config of the chat and mail channels (docs/channels.md): an Apprise delivery route's URL and
message template, the console link, and `[inbox]`, the endpoint a human's reply comes in by.

Everything here is checked at load without reading a secret: an Apprise URL's scheme must be one
Apprise knows, a URL with no `{credential}` placeholder must parse as that channel's URL, and a
template must render. Whether the credentials resolve is the daemon's check when it starts
(`wake.daemon.channels.check_routes`), where the credentials are.
"""

from __future__ import annotations

import functools
import logging
import re
import string
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from wake.config.values import _Model, clip, parse_listen

# The values a route's `template` and `title` may name ({text}, {agent}, ...).
TEMPLATE_FIELDS: tuple[str, ...] = ("text", "agent", "tier", "wake_id", "trigger", "status", "settled_at", "link")
DEFAULT_TEMPLATE = "{text}"
DEFAULT_TITLE = "{agent} ({tier})"
# The Apprise schemes whose receiver gets the wake id as an `Idempotency-Key` header (Apprise's own
# JSON, XML and form webhooks): a receiver that keeps the keys it has seen acts on a resend once.
# Every other channel (chat, mail, push) has no such key: its message carries the wake id.
DEDUPLICATING_SCHEMES: frozenset[str] = frozenset({"json", "jsons", "xml", "xmls", "form", "forms"})
# `{name}` in an Apprise URL: the credential `name` ($CREDENTIALS_DIRECTORY/name, else $NAME).
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]{0,127})\}")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.IGNORECASE)

_SAMPLE = {
    "text": "The final text.", "agent": "demo", "tier": "surface", "wake_id": "00000000-0000-0000-0000-000000000000",
    "trigger": "schedule", "status": "completed", "settled_at": "2026-01-01T00:00:00+00:00", "link": "",
}


def quiet_apprise() -> None:
    """Apprise's own log lines are captured per attempt and never printed (they can carry a
    channel's URL): wake logs each delivery itself, redacted."""
    logger = logging.getLogger("apprise")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)


@functools.cache
def known_schemes() -> frozenset[str]:
    """Every scheme this Apprise can send to (its plugins loaded once)."""
    import apprise  # here, not at the top: a config without an Apprise route never pays for its plugins

    manager: Any = apprise.manager_plugins.NotificationManager  # untyped in Apprise
    return frozenset(s.lower() for s in manager().schemas())


def scheme_of(url: str) -> str | None:
    match = _SCHEME.match(url.strip())
    return match.group(1).lower() if match else None


def check_apprise_url(url: str) -> str:
    """An Apprise URL whose scheme Apprise knows; without placeholders, one that parses."""
    scheme = scheme_of(url)
    if scheme is None or any(c.isspace() for c in url):
        raise ValueError(f"expected an Apprise URL such as tgram://{{bot_token}}/CHAT_ID or mailto://host?to=…, got {clip(url)}")
    if scheme not in known_schemes():
        raise ValueError(f"unknown Apprise scheme {clip(scheme)}:// (docs/channels.md lists the common ones), got {clip(url)}")
    if "{" in url.replace("{{", "").replace("}}", "") and not PLACEHOLDER.search(url):
        raise ValueError(f"expected placeholders as {{credential_name}}, got {clip(url)}")
    import apprise

    quiet_apprise()
    if not PLACEHOLDER.search(url) and apprise.Apprise.instantiate(url) is None:
        raise ValueError(f"the {scheme}:// URL does not parse as an Apprise {scheme} URL (docs/channels.md), got {clip(url)}")
    return url


def check_template(template: str) -> str:
    """A str.format template over TEMPLATE_FIELDS that renders (a bad spec fails here, not at a send)."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"expected a str.format template such as '{{text}}', got {clip(template)} ({clip(str(exc))})") from None
    unknown = [f for f in fields if f not in TEMPLATE_FIELDS]
    if unknown:
        raise ValueError(f"unknown template field {clip(unknown[0])}; expected named fields of: {', '.join(TEMPLATE_FIELDS)}")
    try:
        template.format_map(_SAMPLE)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"the template does not render: {clip(str(exc))} (in {clip(template)})") from None
    return template


def check_apprise_route(url: str | None, url_credential: str | None) -> None:
    """An Apprise route names exactly one of `url` and `url_credential`."""
    if (url is None) == (url_credential is None):
        raise ValueError("an apprise route needs exactly one of url = an Apprise URL (secrets as {credential} placeholders) "
                         "or url_credential = the credential holding the whole URL")
    if url is not None:
        check_apprise_url(url)


TierName = Literal["whisper", "surface", "full"]


class InboxConfig(_Model):
    """`[inbox]`: the daemon's endpoint for a human's message to an agent (docs/channels.md)."""

    # "HOST:PORT"; unset: no endpoint. Loopback by default: a relay on the same host posts to it.
    listen: str | None = None
    # The credential whose value signs every request (X-Wake-Signature, HMAC-SHA256 of
    # "<X-Wake-Timestamp>.<body>"); the daemon refuses to start the endpoint without it.
    secret_credential: str = "wake_inbox_secret"
    # A request larger than this is refused (413) before its body is read.
    max_body_bytes: int = Field(65536, ge=256, le=16 * 1024 * 1024)
    # A request whose timestamp is further than this from the daemon's clock is a replay (401).
    max_skew_s: float = Field(300.0, gt=0)
    # Wake the agent at once for a message: a one-shot of this tier (`wake at`'s mechanism).
    # Unset: the message waits for the agent's next scheduled wake.
    wake_tier: TierName | None = None
    # At most one such wake per agent in this long; a message within it is stored, not a wake.
    wake_min_interval_s: float = Field(300.0, ge=0)

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            parse_listen(value)
        return value

    @model_validator(mode="after")
    def _credential(self) -> InboxConfig:
        if not self.secret_credential.strip():
            raise ValueError("expected secret_credential = the name of the credential that signs inbound requests")
        return self
