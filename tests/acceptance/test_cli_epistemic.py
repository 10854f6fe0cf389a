"""`wake retract`, `wake retractions`, `wake probe`, `wake probes` as subprocesses."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from wake.config import Config

CLI = Callable[..., subprocess.CompletedProcess[str]]

FALSIFIER = [
    "--claim-verbatim", "Worker 013b4306 left no artifacts.",
    "--stood-on", "A narrative summary.",
    "--why-wrong", "Copied from the summary, not read from disk.",
    "--corrected-claim", "It left artifacts/probe.txt.",
    "--test-procedure", "List the artifacts dir.",
    "--expected-retraction-pass-obs", "probe.txt is there.",
]


def test_retract_and_list_due(wake_cli: CLI, store_config: Callable[..., Config]) -> None:
    config = store_config()
    cfg = ["--config", str(config.path)]

    same = wake_cli(*cfg, "retract", *FALSIFIER, "--overturn-retraction-condition", "  Probe.txt IS there. ")
    assert same.returncode == 65
    assert "the same observation" in same.stderr and "Traceback" not in same.stderr
    assert json.loads(wake_cli(*cfg, "retractions", "--json").stdout)["total"] == 0  # nothing stored

    bad_probe = wake_cli(*cfg, "retract", *FALSIFIER, "--overturn-retraction-condition", "no probe.txt",
                         "--probe-target", "x", "--probe-mode", "exists", "--probe-negate")
    assert bad_probe.returncode == 65 and "negate applies to mode contains only" in bad_probe.stderr

    naive = wake_cli(*cfg, "retract", *FALSIFIER, "--overturn-retraction-condition", "no probe.txt", "--corrected-at", "2026-11-20T10:00")
    assert naive.returncode == 2 and "UTC offset" in naive.stderr

    old_at = (dt.datetime.now(dt.UTC) - dt.timedelta(days=4)).isoformat()
    old = wake_cli(*cfg, "retract", *FALSIFIER, "--overturn-retraction-condition", "no probe.txt", "--corrected-at", old_at,
                   "--caught-by", "reality", "--probe-target", "w/probe.txt", "--probe-mode", "contains", "--probe-needle", "OK", "--json")
    assert old.returncode == 0, old.stderr
    old_row = json.loads(old.stdout)
    assert old_row["verdict"] == "unchecked" and old_row["caught_by"] == "reality" and old_row["probe_needle"] == "OK"
    fresh = wake_cli(*cfg, "retract", *FALSIFIER, "--overturn-retraction-condition", "no probe.txt")
    assert fresh.returncode == 0 and "its falsifier is due from" in fresh.stdout

    every = json.loads(wake_cli(*cfg, "retractions", "--json").stdout)
    assert every["total"] == 2
    due = json.loads(wake_cli(*cfg, "retractions", "--due", "--agent", "demo", "--json").stdout)
    assert due["total"] == 1 and [r["id"] for r in due["rows"]] == [old_row["id"]]
    table = wake_cli(*cfg, "retractions", "--due")
    assert table.returncode == 0 and old_row["id"] in table.stdout and "1 of 1 shown" in table.stdout
    assert "probe:     w/probe.txt contains 'OK'" in table.stdout


def test_probe_self_test_and_a_recorded_probe(wake_cli: CLI, store_config: Callable[..., Config], tmp_path: Path) -> None:
    config = store_config('[probes]\nroots = ["root"]\n')
    cfg = ["--config", str(config.path)]
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "notes.txt").write_text("the bug is absent\n")

    test = wake_cli(*cfg, "probe", "--self-test")
    assert test.returncode == 0, test.stderr
    assert "instrument passed its dual-needle controls" in test.stdout and "FAIL" not in test.stdout
    as_json = json.loads(wake_cli(*cfg, "probe", "--self-test", "--json").stdout)
    assert as_json["passed"] is True and len(as_json["controls"]) >= 8

    found = wake_cli(*cfg, "probe", "--target", "notes.txt", "--mode", "contains", "--needle", "absent", "--assertion", "it does not contain absent")
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith("verified  notes.txt contains 'absent'")
    not_found = wake_cli(*cfg, "probe", "--target", "notes.txt", "--mode", "contains", "--needle", "zzz", "--json")
    assert not_found.returncode == 1
    assert json.loads(not_found.stdout)["verdict"] == "falsified"
    escape = wake_cli(*cfg, "probe", "--target", "../wake.toml", "--mode", "exists")
    assert escape.returncode == 1 and escape.stdout.startswith("error") and "'..' escapes" in escape.stdout
    usage = wake_cli(*cfg, "probe", "--target", "notes.txt", "--mode", "exists", "--needle", "x")
    assert usage.returncode == 65 and "takes no needle" in usage.stderr

    records = json.loads(wake_cli(*cfg, "probes", "--json").stdout)
    assert [r["verdict"] for r in records] == ["error", "falsified", "verified"]
    assert records[-1]["assertion"] == "it does not contain absent" and records[-1]["evidence"]["match_count"] == 1
    listed = wake_cli(*cfg, "probes")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 3
