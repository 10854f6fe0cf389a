"""The `[probes]` and `[retractions]` config keys: defaults, relative roots, and bad values named."""

from __future__ import annotations

from pathlib import Path

import pytest

from surfaces import epistemic_tools
from wake import config as wake_config
from wake.errors import ConfigError

TIER = """
[agents.a]
[agents.a.tiers.whisper]
binds = ["wake.whisper"]
sources = ["clock", "due_falsifiers"]
"""


def load(tmp_path: Path, body: str) -> wake_config.Config:
    path = tmp_path / "wake.toml"
    path.write_text(body)
    return wake_config.load_config_file(path, environ={})


def test_defaults_and_the_state_dir_root(tmp_path: Path) -> None:
    config = load(tmp_path, f'state_dir = "{tmp_path / "state"}"\n' + TIER)
    assert config.retractions.falsifier_maturity_days == 3 and config.retractions.due_shown == 5
    assert config.probes.max_file_bytes == 1_048_576
    assert list(config.tool_settings().probe_roots) == [tmp_path / "state" / "probes"]


def test_roots_are_relative_to_the_config_file(tmp_path: Path) -> None:
    config = load(tmp_path, '[probes]\nroots = ["data", "/srv/shared"]\nmax_file_bytes = 10\n' + TIER)
    assert list(config.tool_settings().probe_roots) == [(tmp_path / "data").resolve(), Path("/srv/shared")]
    assert epistemic_tools.instrument(config.tool_settings()).max_file_bytes == 10


@pytest.mark.parametrize("body, key, words", [
    ("[retractions]\nfalsifier_maturity_days = -1\n", "retractions.falsifier_maturity_days", "greater than or equal to 0"),
    ("[retractions]\ndue_shown = 0\n", "retractions.due_shown", "greater than or equal to 1"),
    ('[probes]\nmax_file_bytes = "big"\n', "probes.max_file_bytes", "expected an integer, got 'big'"),
    ('[probes]\nroot = ["x"]\n', "probes.root", "unknown key; expected one of: roots, max_file_bytes"),
    ('[probes]\nroots = "x"\n', "probes.roots", "expected an array"),
])
def test_bad_values_name_the_key(tmp_path: Path, body: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, body + TIER)
    assert err.value.key == key and words in err.value.expected
    assert str(tmp_path / "wake.toml") in err.value.source
