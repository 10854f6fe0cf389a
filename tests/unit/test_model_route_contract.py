"""What a real OpenAI-compatible server needs from a route: wake's own fields stay wake's, money
prints as a number."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support import records
from wake import config as wake_config
from wake.cli import render as report
from wake.errors import ConfigError

TIER = '[agents.a]\n[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\nmodel = "m"\n'
ROUTE = '[models.m]\nbase_url = "http://127.0.0.1:8080/v1"\nmodel = "m"\n'


def _load(tmp_path: Path, body: str, environ: dict[str, str] | None = None) -> wake_config.Config:
    path = tmp_path / "wake.toml"
    path.write_text(body)
    return wake_config.load_config_file(path, environ=environ or {})


@pytest.mark.parametrize(("extra", "named"), [
    ('{ tools = [] }', "tools is set by wake itself"),
    ('{ tool_choice = "required" }', "tool_choice is set by wake itself"),
    ('{ max_tokens = 99999, messages = [] }', "max_tokens, messages are set by wake itself"),
    ('{ model = "other" }', "model is set by wake itself"),
    ('{ stream = true }', "stream is set by wake itself"),
])
def test_extra_body_may_not_set_what_wake_sets(tmp_path: Path, extra: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, ROUTE + f"extra_body = {extra}\n" + TIER)
    assert caught.value.key == "models.m.extra_body" and named in caught.value.expected, caught.value
    assert "\n" not in str(caught.value)


def test_extra_body_from_the_environment_is_refused_the_same_way(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, ROUTE + TIER, {"WAKE_MODELS__M__EXTRA_BODY": '{ tool_choice = "none" }'})
    assert "tool_choice is set by wake itself" in caught.value.expected
    assert caught.value.source.startswith("WAKE_MODELS__M__EXTRA_BODY")


def test_other_extra_body_fields_and_a_tokenizer_url_load(tmp_path: Path) -> None:
    config = _load(tmp_path, ROUTE + 'tokenizer_url = "http://127.0.0.1:8080"\nextra_body = { cache_prompt = true, top_k = 1 }\n' + TIER)
    route = config.models["m"]
    assert route.extra_body == {"cache_prompt": True, "top_k": 1} and route.tokenizer_url == "http://127.0.0.1:8080"
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, ROUTE + 'tokenizer_url = "127.0.0.1:8080"\n' + TIER)
    assert caught.value.key == "models.m.tokenizer_url"


def test_money_is_a_json_number_and_fixed_notation_in_text() -> None:
    row = {"cost_usd": Decimal("0E-8"), "at": dt.datetime(2026, 1, 2, tzinfo=dt.UTC), "blocks": {}, "tool_hashes": {}, "active_tool_names": []}
    decoded = json.loads(report.to_json({"cost_usd": Decimal("0E-8"), "other": Decimal("0.00012345"), "at": row["at"]}))
    assert decoded == {"cost_usd": 0.0, "other": 0.00012345, "at": "2026-01-02T00:00:00+00:00"}
    assert type(decoded["cost_usd"]) is float
    assert "cost_usd: 0.00000000" in report.row(records.wake_record(cost_usd=row["cost_usd"])).splitlines()
