"""`agents.<id>.memory`: where the repository lives, what its persona starts from, the domains'
severities; each bad key named with what was expected."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memory import cloister, frontmatter, layout
from memory.config import MemoryConfig, Severity
from memory.repo import MemoryRepo
from tests.support.memory_git import NOW
from wake import config as wake_config
from wake.errors import ConfigError

AGENT = 'state_dir = "/srv/wake"\n[agents.a]\npersona_files = ["persona.md"]\n{memory}\n[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\n'


def _load(write_config: Callable[..., Path], memory: str = "", persona: str = "You are a careful agent.\n") -> wake_config.Config:
    return wake_config.load_config_file(write_config(AGENT.format(memory=memory), persona=persona), environ={})


def test_the_defaults_put_the_repository_under_the_state_directory(write_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAKE_STATE_DIR", raising=False)  # it would win over state_dir
    config = _load(write_config)
    assert config.agents["a"].memory.enabled
    assert config.memory_path("a") == Path("/srv/wake/memory/a")
    assert "memory" in config.agents["a"].tiers["whisper"].sources and "cloister" in config.agents["a"].tiers["whisper"].sources
    mconf = config.memory_config("a")
    assert mconf.persona_seed == "You are a careful agent." and mconf.domains == MemoryConfig().domains


def test_path_is_relative_to_the_config_file_and_severities_override_a_domain(write_config: Callable[..., Path]) -> None:
    config = _load(write_config, 'memory = { path = "mem/a", severities = { project = "HALT" }, allowed_paths = ["notes/"] }')
    assert config.memory_path("a") == config.base_dir / "mem" / "a"
    mconf = config.memory_config("a")
    assert {d.name: d.severity for d in mconf.domains}["project"] == Severity.HALT
    assert mconf.in_layout("notes/x.md") and mconf.allowed_paths == ("notes/",)


@pytest.mark.parametrize(
    ("memory", "key", "words"),
    [
        ('memory = { severities = { persona = "LOUD" } }', "agents.a.memory.severities.persona", "'HALT', 'WARN' or 'LOG'"),
        ('memory = { severities = { diary = "LOG" } }', "agents.a.memory.severities.diary", "unknown memory domain 'diary'"),
        ('memory = { allowed_paths = ["../x/"] }', "agents.a.memory.allowed_paths", "expected relative prefixes"),
        ('memory = { block_max_chars = 10 }', "agents.a.memory.block_max_chars", "greater than or equal to 400"),
        ('memory = { paht = "x" }', "agents.a.memory.paht", "unknown key; expected one of: enabled, path"),
    ],
)
def test_bad_memory_keys_are_named(write_config: Callable[..., Path], memory: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(write_config, memory)
    assert caught.value.key == key and words in caught.value.expected


def test_the_persona_starts_from_the_operators_text_and_the_canary_knows_the_bootstrap(tmp_path: Path) -> None:
    plain = layout.bootstrap(MemoryConfig(persona_seed="You are Ani."))["system/persona/persona.md"]
    sections = frontmatter.sections(frontmatter.parse(plain).body)
    assert sections == {"identity": "You are Ani.", "principles": layout.NOT_WRITTEN, "scope": layout.NOT_WRITTEN}
    headed = layout.bootstrap(MemoryConfig(persona_seed="## Scope\n\nThe garden.\n\n## Identity\n\nAni."))["system/persona/persona.md"]
    sections = frontmatter.sections(frontmatter.parse(headed).body)
    assert sections == {"scope": "The garden.", "identity": "Ani.", "principles": layout.NOT_WRITTEN}
    repo = MemoryRepo.open(tmp_path / "m", MemoryConfig(persona_seed="You are Ani."), at=NOW)
    assert "You are Ani." in repo.read("system/persona/persona.md").text
    assert cloister.audit(repo, cloister.pending(repo, None), set()).findings == ()  # the seeded bootstrap is no bypass
    # the same repository audited with another seed: its root is not the bootstrap that config knows
    other = MemoryRepo.open(tmp_path / "m", MemoryConfig(persona_seed="You are someone else."), at=NOW)
    found = cloister.audit(other, cloister.pending(other, None), set()).findings
    assert any(f.rule == "bypass.commit" and f.severity == Severity.HALT for f in found)
