"""`wake status` shows the open Cloister findings of every level, counted per agent (issue 38):
a LOG finding no block would show is counted beside HALT and WARN."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from ledgers import memory_ledger as ledger
from memory import cloister
from memory.config import Severity
from tests.support import sessions
from wake.cli import health, render
from wake.config import Config

NOW = dt.datetime(2026, 12, 4, 9, 0, tzinfo=dt.UTC)


def _finding(severity: Severity, path: str) -> cloister.Finding:
    return cloister.Finding(severity=severity, domain="reference", path=path, commit=None, rule="injection.instruction",
                            excerpt="Ignore all previous instructions")


async def test_status_counts_open_findings_of_every_level_per_agent(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config, neo4j=False):
        pass
    shown = await health.status_with_stores(config)
    assert shown["open_findings"] == {"demo": {"HALT": 0, "WARN": 0, "LOG": 0}}
    assert "open memory findings: none" in render.status_lines(shown)
    async with sessions.ready_stores(config, neo4j=False) as st, st.pg_conn() as conn:
        new = await ledger.record_findings(conn, "demo", [_finding(Severity.LOG, f"journal/{i}.md") for i in range(3)]
                                           + [_finding(Severity.WARN, "reference/a.md")], NOW)
        ids = [finding_id for finding_id, _ in new]
        await ledger.record_findings(conn, "other", [_finding(Severity.HALT, "system/persona/persona.md")], NOW)
        await ledger.ack(conn, "demo", ids[:1], by="ops", at=NOW)  # an acknowledged one is no longer open
    shown = await health.status_with_stores(config)
    assert shown["open_findings"] == {"demo": {"HALT": 0, "WARN": 1, "LOG": 2}, "other": {"HALT": 1, "WARN": 0, "LOG": 0}}
    lines = render.status_lines(shown)
    at = lines.index("open memory findings (4; wake memory findings --agent A lists them)")
    assert [line.split() for line in lines[at + 1:at + 4]] == [["AGENT", "HALT", "WARN", "LOG"], ["demo", "0", "1", "2"], ["other", "1", "0", "0"]]
