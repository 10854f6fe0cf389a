"""`wake status` with no daemon alive (issue 42): the next fires are computed from the config, as
the console computes them, instead of "unknown"; a paused tier's next fire is marked skipped."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.acceptance


def test_next_fires_without_a_daemon_come_from_the_config_and_a_pause_marks_them(wake_cli) -> None:  # type: ignore[no-untyped-def]
    paused = wake_cli("pause", "demo", "--tier", "surface", "--by", "ops")
    assert paused.returncode == 0, paused.stderr
    shown = wake_cli("status")
    assert shown.returncode == 0, shown.stderr
    assert "next fires (from the config: no daemon alive to run them)" in shown.stdout and "unknown" not in shown.stdout, shown.stdout
    section = shown.stdout.split("next fires (from the config", 1)[1].split("\n\n", 1)[0]
    rows = {line.split()[1]: line for line in section.splitlines() if line.startswith("  demo ")}
    assert set(rows) >= {"whisper", "surface", "full"}, shown.stdout
    assert "paused by ops" in rows["surface"] and "paused" not in rows["whisper"] and "paused" not in rows["full"]
    fires = {f["tier"]: f for f in json.loads(wake_cli("status", "--json").stdout)["next_fires"]}
    assert fires["surface"]["skipped"] == "paused by ops" and fires["whisper"]["source"] == "config" and fires["full"]["at"]
