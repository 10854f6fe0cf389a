"""`wake costs` over real wakes (the scripted model on loopback, a real pre-check, the gate): its
figures are the ledger's, to the cent, silent wakes included."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support import pooler
from tests.support.daemon_proc import query
from tests.support.openai_server import ScriptedServer, completion

CLI = Callable[..., subprocess.CompletedProcess[str]]

CONFIG = """
[postgres]
dsn = "{pg}"
{pooler}[redis]
url = "{redis}"
[models.scripted]
base_url = "{model}"
model = "scripted-1"
[agents.demo]
timezone = "Europe/Stockholm"
daily_cost_cap_usd = 0.05
[agents.demo.tiers.whisper]
binds = ["wake.whisper"]
model = "scripted"
[agents.demo.tiers.surface]
binds = ["wake.whisper", "wake.surface"]
model = "scripted"
ok_token = "NOTHING_TO_REPORT"
[agents.demo.tiers.full]
binds = ["wake.whisper"]
model = "scripted"
precheck = ["{precheck}"]
[agents.other]
[agents.other.tiers.surface]
binds = ["wake.whisper"]
model = "scripted"
"""


def _up(wake_cli: CLI, config: Path, *args: str) -> dict[str, object]:
    result = wake_cli("--config", str(config), "up", "--json", *args)
    assert result.returncode == 0, result.stderr
    outcome: dict[str, object] = json.loads(result.stdout)
    return outcome


def test_costs_agree_with_the_ledger_to_the_cent(wake_cli: CLI, tmp_path: Path, pg_dsn: str, redis_url: str) -> None:
    precheck = tmp_path / "nothing-to-do.sh"
    precheck.write_text("#!/bin/sh\nexit 1\n")
    precheck.chmod(0o755)
    with ScriptedServer() as server:
        config = tmp_path / "wake.toml"
        config.write_text(CONFIG.format(pooler=pooler.key(), pg=pg_dsn, redis=redis_url, model=server.url, precheck=precheck))
        server.push(
            completion("Checked the queue; two items moved.", cost=0.0123),
            completion("NOTHING_TO_REPORT", cost=0.0021),  # quiet, its tokens spent
            completion("All calm.", cost=0.00456),
            completion("Other agent's notes.", cost=0.25),
        )
        seen = [
            _up(wake_cli, config, "--agent", "demo", "--tier", "surface"),
            _up(wake_cli, config, "--agent", "demo", "--tier", "surface"),
            _up(wake_cli, config, "--agent", "demo", "--tier", "whisper"),
            _up(wake_cli, config, "--agent", "demo", "--tier", "whisper"),  # nothing changed: the gate ends it, no call
            _up(wake_cli, config, "--agent", "demo", "--tier", "full"),  # the pre-check exits 1: quiet, no call
            _up(wake_cli, config, "--agent", "other", "--tier", "surface"),
        ]
        assert len(server.requests) == 4  # the gate and the pre-check made no call
    assert [o["status"] for o in seen] == ["completed", "quiet", "completed", "quiet", "quiet", "completed"]

    by_tier = wake_cli("--config", str(config), "costs", "--agent", "demo", "--by", "tier", "--json")
    assert by_tier.returncode == 0, by_tier.stderr
    report = json.loads(by_tier.stdout)
    ledger = query(pg_dsn, "SELECT tier, count(*) AS wakes, sum(cost_usd) AS cost, sum(prompt_tokens) AS prompt, sum(cached_tokens) AS cached, "
                           "sum(completion_tokens) AS completion FROM wake_introspection_ledger WHERE agent_id = 'demo' GROUP BY tier ORDER BY tier")
    assert [g["key"] for g in report["groups"]] == [r["tier"] for r in ledger] == ["full", "surface", "whisper"]
    for group, row in zip(report["groups"], ledger, strict=True):
        assert round(Decimal(str(group["cost_usd"])), 2) == round(row["cost"], 2)
        assert Decimal(str(group["cost_usd"])) == row["cost"]  # exactly, in fact
        assert (group["wakes"], group["prompt_tokens"], group["cached_tokens"], group["completion_tokens"]) == (
            row["wakes"], row["prompt"], row["cached"], row["completion"])
    total = report["total"]
    assert Decimal(str(total["cost_usd"])) == Decimal("0.0123") + Decimal("0.0021") + Decimal("0.00456")
    assert total["outcomes"] == {"completed": 2, "quiet": 3}  # the silent wakes are counted
    assert (total["gated"], total["prechecked"], total["ok_token"], total["capped"], total["turns"]) == (1, 1, 1, 0, 3)
    surface = next(g for g in report["groups"] if g["key"] == "surface")
    ok_row = query(pg_dsn, "SELECT prompt_tokens FROM wake_introspection_ledger WHERE stop_reason = 'nothing_to_report'")[0]
    assert ok_row["prompt_tokens"] > 0 and surface["prompt_tokens"] > ok_row["prompt_tokens"]  # the ok_token wake's tokens are in the sum
    [cap] = report["daily_cap"]
    assert cap["agent_id"] == "demo" and cap["cap_usd"] == 0.05
    assert Decimal(str(cap["headroom_usd"])) == Decimal("0.05") - Decimal(str(total["cost_usd"]))

    everyone = json.loads(wake_cli("--config", str(config), "costs", "--by", "agent", "--json").stdout)
    assert [(g["key"], g["wakes"]) for g in everyone["groups"]] == [("demo", 5), ("other", 1)]
    assert Decimal(str(everyone["total"]["cost_usd"])) == query(pg_dsn, "SELECT sum(cost_usd) AS s FROM wake_introspection_ledger")[0]["s"]
    caps = {c["agent_id"]: c for c in everyone["daily_cap"]}
    assert caps["other"]["cap_usd"] is None and caps["other"]["headroom_usd"] is None and caps["other"]["spent_today_usd"] == 0.25

    text = wake_cli("--config", str(config), "costs", "--agent", "demo")
    assert text.returncode == 0, text.stderr
    day_line, total_line = text.stdout.splitlines()[2], text.stdout.splitlines()[3]
    assert "completed 2, quiet 3" in day_line and "$0.0190" in day_line and "1/1/0" in day_line
    assert total_line.split()[0] == "total" and "$0.0190" in total_line
    assert "daily cap of demo: $0.0500, spent today $0.0190, headroom $0.0310" in text.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--agent", "nobody"), "no agent 'nobody' is configured; known: demo, other"),
        (("--since", "last tuesday"), "cannot read --since 'last tuesday'"),
        (("--since", "2999-01-01"), "which lies ahead"),
        (("--since", "99999d"), "expected a duration of at most"),
    ],
    ids=["unknown_agent", "unreadable_since", "future_since", "too_long"],
)
def test_bad_input_is_one_line_and_exit_65(wake_cli: CLI, tmp_path: Path, pg_dsn: str, redis_url: str, args: tuple[str, ...], words: str) -> None:
    config = tmp_path / "wake.toml"
    config.write_text(CONFIG.format(pooler=pooler.key(), pg=pg_dsn, redis=redis_url, model="http://127.0.0.1:9", precheck="/bin/true"))
    result = wake_cli("--config", str(config), "costs", *args)
    assert result.returncode == 65, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert len(lines) == 1 and lines[0].startswith("wake: ") and words in lines[0], result.stderr
    assert result.stdout == ""
