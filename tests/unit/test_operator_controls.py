"""The operator controls' pure parts: reading an operator's time, the pre-check's and the
ok_token's decisions, the blocks a tier's keys add, the delivery signature and the config keys."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import hmac
import uuid
from pathlib import Path

import pytest

from ledgers import introspection, outbox
from ledgers.vocab import Result, Retrieval
from wake import config as wake_config
from wake.arrival import operator_sources
from wake.arrival.engine import Block, CacheTier
from wake.daemon.commands import parse_when
from wake.daemon.outbox import body_of, signature
from wake.errors import ConfigError, InvalidInput
from wake.run import cycle, deliver
from wake.think import decide
from wake.think.loop import Thought

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", NOW + dt.timedelta(minutes=30)),
        ("+2h", NOW + dt.timedelta(hours=2)),
        ("in 1d", NOW + dt.timedelta(days=1)),
        ("2026-12-01T12:00", dt.datetime(2026, 12, 1, 11, 0, tzinfo=dt.UTC)),  # local to Europe/Stockholm (UTC+1)
        ("2026-12-01T12:00+00:00", dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)),
        ("2026-12-01T12:00Z", dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)),
        ("11:00", dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC)),  # later today, local
        ("10:00", dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)),  # 10:00 local is 09:00 UTC, passed: tomorrow
    ],
)
def test_an_operators_time(text: str, expected: dt.datetime) -> None:
    assert parse_when(text, NOW, "Europe/Stockholm") == expected


@pytest.mark.parametrize("text", ["soon", "0m", "25:00", "2026-13-01", ""])
def test_a_time_that_does_not_parse_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_when(text, NOW, "UTC")
    assert "\n" not in str(caught.value)


def _block(name: str, result: Result, retrieval: Retrieval = Retrieval.ok, reason: str | None = None) -> Block:
    return Block(name=name, cache_tier=CacheTier.volatile, text="t", retrieval=retrieval, result=result, reason=reason, latency_ms=1.0, rows=0)


def test_the_precheck_block_decides_before_the_model() -> None:
    assert decide.prechecked([_block("clock", Result.present)]) is None  # no pre-check: go on
    assert decide.prechecked([_block("precheck", Result.present)]) is None  # exit 0: think
    quiet = decide.prechecked([_block("precheck", Result.empty)])
    assert quiet is not None and quiet.status == "quiet" and quiet.thinking is not None and quiet.thinking.stop_reason == "precheck"
    failed = decide.prechecked([_block("precheck", Result.unknown, Retrieval.failed, "PrecheckFailed: pre-check 'x' exited 2")])
    assert failed is not None and failed.status == "failed" and failed.error == "PrecheckFailed: pre-check 'x' exited 2"


def _thought(text: str | None, status: str = "completed") -> Thought:
    return Thought(status=status, note="done", error=None, thinking=introspection.Thinking(model="m", prompt_tokens=50, stop_reason="done"),
                   final_text=text)


def test_only_the_whole_answer_being_the_token_is_quiet() -> None:
    quiet = decide.nothing_to_report("NOTHING_TO_REPORT", _thought(" NOTHING_TO_REPORT\n"))
    assert quiet.status == "quiet" and quiet.final_text is None and quiet.thinking is not None
    assert (quiet.thinking.stop_reason, quiet.thinking.prompt_tokens) == ("nothing_to_report", 50)
    for kept in (_thought("NOTHING_TO_REPORT, except the build is red"), _thought("nothing_to_report"), _thought("NOTHING_TO_REPORT", "halted")):
        assert decide.nothing_to_report("NOTHING_TO_REPORT", kept) is kept
    assert decide.nothing_to_report(None, _thought("NOTHING_TO_REPORT")).status == "completed"


def _config(tmp_path: Path, tier: str, extra: str = "") -> wake_config.Config:
    path = tmp_path / "wake.toml"
    path.write_text(f"{extra}\n[agents.a.tiers.whisper]\nbinds = [\"wake.whisper\"]\n{tier}\n")
    return wake_config.load_config_file(path, environ={})


def test_a_tiers_keys_add_their_blocks_and_nothing_without_them(tmp_path: Path) -> None:
    assert operator_sources.tier_sources(_config(tmp_path, "").tier("a", "whisper")) == []
    conf = _config(tmp_path, 'instructions_file = "c.md"\ninstructions_cache_tier = "static"\nprecheck = ["true"]\nprecheck_timeout_s = 3\n')
    added = operator_sources.tier_sources(conf.tier("a", "whisper"))
    assert [(s.name, s.cache_tier, s.timeout_s) for s in added] == [
        ("instructions", CacheTier.static, None), ("precheck", CacheTier.volatile, 3 + operator_sources.PRECHECK_MARGIN_S),
    ]
    assert added[1].derived  # after the other sources, before the model
    assert [s.name for s in cycle.tier_sources(conf, "a", "whisper")][-2:] == ["instructions", "precheck"]


@pytest.mark.parametrize(
    ("tier", "extra", "words"),
    [
        ('deliver_to = ["pager"]', "", "deliver_to.0: unknown delivery route 'pager'; expected one of [delivery.*]: (none defined)"),
        ("precheck = []", "", "agents.a.tiers.whisper.precheck"),
        ('ok_token = ""', "", "agents.a.tiers.whisper.ok_token"),
        ("misfire_grace_s = -1", "", "agents.a.tiers.whisper.misfire_grace_s"),
        ("", '[delivery.f]\nkind = "file"\n', "a file route needs path"),
        ("", '[delivery.w]\nkind = "webhook"\nurl = "ftp://x"\n', "a webhook route needs url"),
        ("", '[sql_sources.precheck]\nsql = "SELECT 1"\ntemplate = "{x}"\n', "sql_sources.precheck"),
    ],
)
def test_bad_operator_keys_are_config_errors(tmp_path: Path, tier: str, extra: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, tier, extra)
    assert words in str(caught.value)


def test_only_a_completed_wake_with_text_delivers_and_every_attempt_signs_the_same_bytes(tmp_path: Path) -> None:
    conf = _config(tmp_path, 'deliver_to = ["log"]', '[delivery.log]\nkind = "stdout"\n')
    common = dict(wake_id=uuid.uuid4(), agent_id="a", tier="whisper", trigger="schedule", manifest_root=None, settled_at=NOW)
    assert [d.route for d in deliver.deliveries(conf, status="completed", final_text="hello", **common)] == ["log"]  # type: ignore[arg-type]
    for status, text in (("quiet", "hello"), ("failed", "hello"), ("completed", "  "), ("completed", None)):
        assert deliver.deliveries(conf, status=status, final_text=text, **common) == []  # type: ignore[arg-type]
    row = outbox.Due(id=7, wake_id=uuid.uuid4(), route="log", agent_id="a", tier="whisper", payload={"wake_id": "w", "text": "hello"},
                     attempts=0, created_at=NOW)
    assert body_of(row) == body_of(dataclasses.replace(row)) and b'"delivery_id":7' in body_of(row)
    assert signature("k", body_of(row)) == "sha256=" + hmac.new(b"k", body_of(row), hashlib.sha256).hexdigest()
