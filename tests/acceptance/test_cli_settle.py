"""`wake settle`: the operator's writer of the settled state, as a subprocess (docs/facts.md)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from tests.support import marked
from wake.config import Config

AGENTS = """
[agents.demo]
timezone = "Europe/Stockholm"
[agents.demo.tiers.full]
binds = ["wake"]
sources = ["settled_facts"]
"""


def test_wake_settle_records_the_state_the_next_arrival_shows(
    wake_cli: Callable[..., subprocess.CompletedProcess[str]], store_config: Callable[..., Config]
) -> None:
    config = store_config(agents=AGENTS)
    cfg = ["--config", str(config.path)]
    before = json.loads(wake_cli(*cfg, "up", "--tier", "full", "--dry-run", "--json").stdout)["prompt"]
    done = wake_cli(*cfg, "settle", "timereport", "reported: Kvällsskift 8 h", "--on", "2026-10-22")
    bad = wake_cli(*cfg, "settle", "timereport", "x", "--on", "22/10/2026")
    empty = wake_cli(*cfg, "settle", " ", "x")
    after = wake_cli(*cfg, "up", "--tier", "full", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("settled state ") and done.stdout.rstrip().endswith("for agent demo: 2026-10-22 timereport")
    assert bad.returncode == 2 and "'22/10/2026'" in bad.stderr
    assert empty.returncode == 2 and "must be non-empty" in empty.stderr
    assert "Settled state: none recorded" in before
    assert "Settled state: 2026-10-22 timereport: reported: Kvällsskift 8 h" in marked.plain(json.loads(after.stdout)["prompt"])
