"""An id prefix on the command line names one row or is refused in one line: `wake show`, `wake probes --retraction`."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import uuid
from collections.abc import Callable

import asyncpg
import pytest

from ledgers import introspection, retractions
from wake.config import Config

CLI = Callable[..., subprocess.CompletedProcess[str]]

TWIN_A = uuid.UUID("abcd0000-0000-4000-8000-000000000001")
TWIN_B = uuid.UUID("abcd0000-0000-4000-8000-000000000002")
LONE = uuid.UUID("12345678-9abc-4def-8000-000000000003")
RETRACTIONS = {"demo": uuid.UUID("beef0000-0000-4000-8000-000000000001"), "other": uuid.UUID("beef0000-0000-4000-8000-000000000002")}


async def _record_wakes(dsn: str, wake_ids: list[uuid.UUID]) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for n, wake_id in enumerate(wake_ids):
            row = introspection.WakeRow(
                wake_id=wake_id, agent_id="demo", tier="whisper", trigger="manual", scheduled_for=None,
                started_at=dt.datetime(2026, 11, 1, 10, n, tzinfo=dt.UTC), manifest_root=f"{n:064x}",
                host="test", pid=1, version="test", config_hash="0" * 64,
            )
            await introspection.insert(conn, row, status="completed")
        for n, (agent_id, row_id) in enumerate(RETRACTIONS.items()):
            await retractions.insert(conn, retractions.NewRetraction(
                id=row_id, agent_id=agent_id, claim_verbatim="c", stood_on="s", why_wrong="w", corrected_claim="k",
                test_procedure="t", expected_retraction_pass_obs="yes", overturn_retraction_condition="no",
                corrected_at=dt.datetime(2026, 11, 1, 10, n, tzinfo=dt.UTC),
            ))
    finally:
        await conn.close()


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line the command printed for a person (its JSON log lines aside)."""
    lines = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def config_args(store_config: Callable[..., Config], pg_dsn: str) -> list[str]:
    asyncio.run(_record_wakes(pg_dsn, [TWIN_A, TWIN_B, LONE]))
    return ["--config", str(store_config().path)]


@pytest.mark.parametrize("text, says", [
    ("", "'' is too short to name one row: give at least 4 hex digits of the id"),
    ("%", "'%' is not an id or the start of one"),
    ("_", "'_' is not an id or the start of one"),
    ("ab%", "'ab%' is not an id or the start of one"),
    ("abc", "'abc' is too short to name one row: give at least 4 hex digits of the id"),
])
def test_a_prefix_that_is_no_prefix_is_refused_in_one_line(wake_cli: CLI, config_args: list[str], text: str, says: str) -> None:
    done = wake_cli(*config_args, "show", text)
    assert done.returncode == 1 and done.stdout == ""
    assert _one_line(done).startswith(f"wake: {says}")


def test_an_ambiguous_prefix_is_refused_with_its_matches(wake_cli: CLI, config_args: list[str]) -> None:
    done = wake_cli(*config_args, "show", "ABCD")
    assert done.returncode == 1 and done.stdout == ""
    assert _one_line(done) == f"wake: 'ABCD' matches 2 wakes: {TWIN_B}, {TWIN_A} (give more of the id)"  # newest first


def test_a_unique_prefix_and_a_full_id_still_show_the_wake(wake_cli: CLI, config_args: list[str]) -> None:
    for text in ("1234", "12345678-9A", str(TWIN_A)):
        done = wake_cli(*config_args, "show", text, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["wake_id"] in (str(LONE), str(TWIN_A))
    assert json.loads(wake_cli(*config_args, "show", "abcd0000-0000-4000-8000-000000000002", "--json").stdout)["wake_id"] == str(TWIN_B)
    missing = wake_cli(*config_args, "show", "ffff")
    assert missing.returncode == 1 and _one_line(missing).startswith("wake: no wake matches 'ffff'")


def test_a_retraction_prefix_is_held_to_the_same_rule(wake_cli: CLI, config_args: list[str]) -> None:
    done = wake_cli(*config_args, "probes", "--retraction", "%")
    assert done.returncode == 1 and _one_line(done).startswith("wake: '%' is not an id or the start of one")
    shared = wake_cli(*config_args, "probes", "--retraction", "beef")
    assert shared.returncode == 1
    assert _one_line(shared) == f"wake: 'beef' matches 2 retractions: {RETRACTIONS['other']}, {RETRACTIONS['demo']} (give more of the id)"
    one_agent = wake_cli(*config_args, "probes", "--agent", "demo", "--retraction", "beef", "--json")
    assert one_agent.returncode == 0 and json.loads(one_agent.stdout) == []  # unique among demo's rows; no probe yet
