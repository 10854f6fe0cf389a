"""`agents.<id>.recall` and `sql_sources.<name>.absence_claims`: defaults, per-agent values, bad values named."""

from __future__ import annotations

from pathlib import Path

import pytest

from surfaces.context import RecallSettings
from wake import config as wake_config
from wake.errors import ConfigError

AGENTS = """
[agents.a]
[agents.a.tiers.whisper]
binds = ["wake.whisper"]
[agents.b]
[agents.b.recall]
dictionary = "english"
continuing_cap = 4
recent_entries = 0
[agents.b.tiers.whisper]
binds = ["wake.whisper"]
"""


def load(tmp_path: Path, body: str) -> wake_config.Config:
    path = tmp_path / "wake.toml"
    path.write_text(body)
    return wake_config.load_config_file(path, environ={})


def test_each_agent_has_its_own_recall_settings(tmp_path: Path) -> None:
    settings = load(tmp_path, AGENTS).tool_settings()
    assert settings.recall_of("a") == RecallSettings()
    assert (settings.recall_of("a").dictionary, settings.recall_of("a").continuing_candidates) == ("simple", 24)
    assert settings.recall_of("b") == RecallSettings(dictionary="english", continuing_cap=4, recent_entries=0)
    assert settings.recall_of("nobody") == RecallSettings()


def test_an_override_sets_the_dictionary(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(AGENTS)
    config = wake_config.load_config_file(path, environ={"WAKE_AGENTS__A__RECALL__DICTIONARY": "swedish"})
    assert config.tool_settings().recall_of("a").dictionary == "swedish"


@pytest.mark.parametrize("extra, key, words", [
    ('[agents.a.recall]\ndictionary = "english; drop table facts"\n', "agents.a.recall.dictionary", "text search configuration name"),
    ("[agents.a.recall]\ncontinuing_cap = 0\n", "agents.a.recall.continuing_cap", "greater than or equal to 1"),
    ("[agents.a.recall]\nstemming = true\n", "agents.a.recall.stemming", "unknown key"),
    ('[sql_sources.s]\nsql = "SELECT 1 AS x"\ntemplate = "{x}"\nabsence_claims = "no rows"\n', "sql_sources.s.absence_claims", "array"),
])
def test_bad_values_are_named(tmp_path: Path, extra: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, AGENTS.replace("[agents.a.tiers.whisper]", extra + "[agents.a.tiers.whisper]", 1) if "agents.a.recall" in extra
             else extra + AGENTS)
    assert key in str(caught.value) and words in str(caught.value)
