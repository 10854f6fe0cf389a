"""The shipped Prometheus alert rules (config/alerts/wake.rules.yml, docs/incidents.md) pass
`promtool check rules` and their own unit tests (`promtool test rules`), and alert on the gauge
the daemon exports under the name it exports it.

promtool is Debian's `prometheus` package (.ci/run installs it and sets WAKE_REQUIRE_PROMTOOL=1:
there a missing promtool fails; on a machine without it these tests skip and say how to get it)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from wake.observe import metrics

ALERTS = Path(__file__).resolve().parents[2] / "config" / "alerts"


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        why = "promtool is missing: `apt-get install prometheus` (Debian) runs the alert rules' tests"
        if os.environ.get("WAKE_REQUIRE_PROMTOOL") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return found


def _run(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], cwd=ALERTS, capture_output=True, text=True, timeout=120, check=False)


def test_the_rules_are_valid_and_pass_their_tests(promtool: str) -> None:
    checked = _run(promtool, "check", "rules", "wake.rules.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _run(promtool, "test", "rules", "wake.rules.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_a_rule_test_that_expects_the_wrong_thing_fails(promtool: str, tmp_path: Path) -> None:
    """The harness can fail: the same tests with the silent tier's alert expected an hour early."""
    (tmp_path / "wake.rules.yml").write_text((ALERTS / "wake.rules.yml").read_text())
    text = (ALERTS / "wake.rules.test.yml").read_text().replace("- eval_time: 1h\n        alertname: WakeTierSilent\n        exp_alerts: []",
                                                               "- eval_time: 1h\n        alertname: WakeTierSilent\n"
                                                               "        exp_alerts: [{exp_labels: {severity: critical, agent: demo, tier: whisper}}]")
    assert text != (ALERTS / "wake.rules.test.yml").read_text()
    (tmp_path / "wake.rules.test.yml").write_text(text)
    failed = subprocess.run([promtool, "test", "rules", "wake.rules.test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            check=False)
    assert failed.returncode != 0 and "FAILED" in (failed.stdout + failed.stderr)


def test_the_rules_name_the_gauge_the_daemon_exports() -> None:
    m = metrics.Metrics(agents={"demo": metrics.AgentInfo(tiers=("whisper",))})
    m.set_last_settled({("demo", "whisper"): dt.datetime(2026, 1, 1, tzinfo=dt.UTC)})
    assert m.registry.get_sample_value("wake_last_settled_timestamp_seconds", {"agent": "demo", "tier": "whisper"}) == 1767225600.0
    assert "wake_last_settled_timestamp_seconds" in (ALERTS / "wake.rules.yml").read_text()
