"""Config of steps 8-9: routes, the model loop's limits, the gate; bad input names file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from wake import config as wake_config
from wake.errors import ConfigError

TIER = '[agents.a]\n[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\n'


def _load(tmp_path: Path, body: str) -> wake_config.Config:
    path = tmp_path / "wake.toml"
    path.write_text(body)
    return wake_config.load_config_file(path, environ={})


@pytest.mark.parametrize(("body", "key", "words"), [
    ('[[gate.escalate]]\nwhen = "present"\nblock = "due_falsifiers"\n' + TIER, "gate.escalate.0.to", "agent 'a' has no surface tier to escalate to"),
    ('[[gate.escalate]]\nwhen = "changed"\n' + TIER, "gate.escalate.0", "expected a block name for when = 'changed'"),
    ('[[gate.escalate]]\nwhen = "sometimes"\n' + TIER, "gate.escalate.0.when", "expected 'present', 'changed' or 'newly_failing'"),
    ("[think]\ntool_result_max_chars = 10\n" + TIER, "think.tool_result_max_chars", "greater than or equal to 100"),
    ('[models.m]\nbase_url = "http://x/v1"\nmodel = "m"\nmax_retries = -1\n' + TIER, "models.m.max_retries", "greater than or equal to 0"),
    ('[models.m]\nbase_url = "http://x/v1"\nmodel = "m"\nretry_after_cap_s = 3\n' + TIER, "models.m.retry_after_cap_s",
     "unknown key; expected one of: kind, base_url"),
])
def test_bad_thinking_config_names_the_key(tmp_path: Path, body: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, body)
    assert caught.value.key == key and words in caught.value.expected, caught.value
    assert caught.value.source == str(tmp_path / "wake.toml")


def test_defaults_and_a_full_route(tmp_path: Path) -> None:
    config = _load(tmp_path, (
        '[models.or]\nbase_url = "https://openrouter.ai/api/v1"\nmodel = "x/y"\napi_key_credential = "openrouter_api_key"\n'
        "cached_input_usd_per_mtok = 0.1\nextra_body = { usage = { include = true } }\n"
        '[[gate.escalate]]\nwhen = "newly_failing"\n' + TIER.replace('binds = ["wake.whisper"]\n', 'binds = ["wake.whisper"]\nmodel = "or"\n')
        + '[agents.a.tiers.surface]\nbinds = ["wake"]\n'
    ))
    route = config.models["or"]
    assert (route.max_retries, route.retry_cap_s, route.extra_body) == (4, 30.0, {"usage": {"include": True}})
    assert config.gate.due_blocks == ("due_falsifiers",) and config.gate.escalate[0].to == "surface"
    assert (config.think.tool_timeout_s, config.think.max_repeat_calls) == (30.0, 3)


def test_the_embedded_default_binds_no_model_so_wake_up_needs_no_server() -> None:
    config = wake_config.load_config_file(wake_config.EMBEDDED_DEFAULT, environ={})
    assert all(t.model is None for agent in config.agents.values() for t in agent.tiers.values())
