"""The outbox's sender from a test: one pass over what is due (`send_due`)."""

from __future__ import annotations

from wake import stores
from wake.config import Config
from wake.daemon import outbox as sender_mod


async def send_due(config: Config) -> int:
    """One `deliver_due` of a sender over the test's stores (owner `test-sender`); how many it sent."""
    async with stores.connected(config) as st:
        sender = sender_mod.Sender(lambda: config, st, owner="test-sender")
        try:
            return await sender.deliver_due()
        finally:
            await sender._http.aclose()
