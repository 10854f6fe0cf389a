"""A tier's memory may be read-only (`memory.writable = false`, a whisper's default): its wakes
bind no tool that writes memory, and still read it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from surfaces import loader, memory_tools
from wake import config as wake_config
from wake.errors import ConfigError
from wake.run import cycle

CONFIG = """
[agents.a.tiers.whisper]
binds = ["wake"]
[agents.a.tiers.surface]
binds = ["wake"]
memory = { writable = false }
[agents.a.tiers.full]
binds = ["wake"]
[agents.b.tiers.whisper]
binds = ["wake"]
memory = { writable = true }
"""


def test_read_only_memory_binds_the_reader_not_the_writer(write_config: Callable[..., Path]) -> None:
    config = wake_config.load_config_file(write_config(CONFIG), environ={})
    registry = loader.build(entry_points=False)
    names = {(a, t): {tool.name for tool in cycle.bind(registry, config, a, t)} for a, t in
             [("a", "whisper"), ("a", "surface"), ("a", "full"), ("b", "whisper")]}
    assert memory_tools.WRITING_TOOLS == {"memory"}
    for key in [("a", "whisper"), ("a", "surface")]:  # the whisper's default, and a tier that says so
        assert "memory" not in names[key] and "memory_read" in names[key], key
    for key in [("a", "full"), ("b", "whisper")]:  # the deeper tiers' default, and a whisper that says so
        assert {"memory", "memory_read"} <= names[key], key
    assert names[("a", "full")] - names[("a", "surface")] == {"memory"}  # nothing else differs


def test_an_unknown_memory_key_is_a_config_error(write_config: Callable[..., Path]) -> None:
    path = write_config('[agents.a.tiers.whisper]\nbinds = ["wake"]\nmemory = { writeable = false }\n')
    with pytest.raises(ConfigError, match="writeable"):
        wake_config.load_config_file(path, environ={})
