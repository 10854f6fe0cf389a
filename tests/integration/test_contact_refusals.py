"""A message through the Python API is refused whole (`MessageRefused`) when a text column
could not hold it or it is over the cap: nothing is stored."""

from __future__ import annotations

import datetime as dt

import asyncpg
import pytest

from ledgers import contact
from ledgers.errors import MessageRefused

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(("body", "needle"), [
    ("before\x00after", "NUL character (at 6 of 12)"),
    ("caf\udce9", "not valid UTF-8 (at 3 of 4)"),
    ("x" * (contact.MESSAGE_MAX_CHARS + 1), f"{contact.MESSAGE_MAX_CHARS + 1} characters"),
    ("  \n", "empty"),
])
async def test_a_message_a_column_cannot_hold_or_over_the_cap_is_refused_and_nothing_stored(pg_dsn: str, body: str, needle: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        with pytest.raises(MessageRefused, match=needle.replace("(", r"\(").replace(")", r"\)")):
            await contact.record(conn, agent_id="demo", author="human", channel="cli", body=body, received_at=T0)
        assert await conn.fetchval("SELECT count(*) FROM human_contact") == 0
        assert await contact.record(conn, agent_id="demo", author="human", channel="cli", body="x" * contact.MESSAGE_MAX_CHARS, received_at=T0)
    finally:
        await conn.close()
