"""The vocabulary types and the database agree, and the built-in sources match their names."""

from __future__ import annotations

import re
from pathlib import Path

from ledgers.vocab import Status, Tier, Trigger
from wake import config
from wake.arrival import sources

MIGRATIONS = Path(__file__).resolve().parents[2] / "ledgers" / "migrations"


def _check_values(column: str) -> set[str]:
    """The values of the newest `CHECK (<column> IN (...))` on the introspection ledger: 0001
    created it, a later migration may have replaced it (migrations apply in file order). An
    integration test (tests/integration/test_operator_controls.py) reads the live constraint."""
    found = None
    for path in sorted(MIGRATIONS.glob("*.sql")):
        statements = re.findall(r"(?:CREATE|ALTER) TABLE wake_introspection_ledger\b[^;]*;", path.read_text())
        for match in (re.search(rf"CHECK \(\s*{column} IN \(([^)]*)\)", s) for s in statements):
            found = match or found
    assert found is not None, column
    return set(re.findall(r"'([a-z_]+)'", found.group(1)))


def test_each_stored_set_is_the_one_the_database_accepts() -> None:
    assert {s.value for s in Status} == _check_values("status")
    assert {t.value for t in Tier} == _check_values("tier")
    assert {t.value for t in Trigger} == _check_values("trigger")


def test_a_member_is_its_string() -> None:
    assert Status.quiet == "quiet" and f"{Trigger.catch_up}" == "catch_up" and Tier("full") is Tier.full


def test_config_knows_every_built_in_source_by_name() -> None:
    assert set(sources.BUILTIN) == config.BUILTIN_SOURCES
