"""A real SMTP server on loopback (aiosmtpd) that keeps every message it accepts.

`refuse_rcpt` answers every RCPT with that reply (e.g. "550 5.1.1 no such user"): a permanent
refusal as a real server gives it. Credentials in a mailto:// URL make the client try AUTH, which
this server (no TLS) does not offer: the refused login a misconfigured route meets.
"""

from __future__ import annotations

import email
import email.message
import email.policy
import socket
import threading
from typing import Any

from aiosmtpd.controller import Controller


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SmtpServer:
    def __init__(self, *, refuse_rcpt: str | None = None) -> None:
        self.messages: list[email.message.EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.arrived = threading.Event()
        self.refuse_rcpt = refuse_rcpt
        self.port = _free_port()
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]) -> str:
        if self.refuse_rcpt is not None:
            return self.refuse_rcpt
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(message, email.message.EmailMessage)
        self.messages.append(message)
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.arrived.set()
        return "250 Message accepted for delivery"

    def url(self, *, to: str = "human@example.org", sender: str = "wake@example.org", credentials: str = "") -> str:
        """The Apprise mailto:// URL of this server (plain SMTP, no TLS)."""
        return f"mailto://{credentials}127.0.0.1:{self.port}?from={sender}&to={to}&mode=insecure"

    def text_of(self, n: int) -> str:
        part = self.messages[n].get_body(preferencelist=("plain",))
        assert part is not None
        return str(part.get_content())

    def start(self) -> SmtpServer:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    def __enter__(self) -> SmtpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
