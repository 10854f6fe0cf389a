"""Configuration: every kind of bad input names the file, the key path and what was expected."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import DEMO_TIERS
from tests.support import cli_fork, config_errors
from wake import config as wake_config
from wake.errors import ConfigError

TIER = """
[agents.a]
[agents.a.tiers.whisper]
binds = ["wake.whisper"]
"""

BAD_CASES: list[tuple[str, str, str, str]] = [
    # (id, toml body, expected key path, words the message must contain)
    ("wrong_type", TIER + "jitter_s = \"ten\"\n", "agents.a.tiers.whisper.jitter_s", "expected an integer, got 'ten'"),
    ("unknown_top_key", "postgress = {}\n" + TIER, "postgress", "unknown key; expected one of: state_dir, postgres"),
    ("unknown_nested_key", TIER + "bind = [\"x\"]\n", "agents.a.tiers.whisper.bind", "unknown key; expected one of: cron, every"),
    ("bad_cron", TIER + "cron = \"61 * * * *\"\n", "agents.a.tiers.whisper.cron", "expected a 5-field cron expression, got '61 * * * *'"),
    ("cron_field_count", TIER + "cron = \"* * *\"\n", "agents.a.tiers.whisper.cron", "Wrong number of fields"),
    ("unknown_tier", "[agents.a.tiers.wisper]\nbinds = [\"wake\"]\n", "agents.a.tiers.wisper",
     "unknown tier 'wisper'; expected one of whisper, surface, full"),
    ("unknown_surface", "[agents.a.tiers.whisper]\nbinds = [\"wake.whisperr\"]\n", "agents.a.tiers.whisper.binds.0",
     "unknown surface 'wake.whisperr'"),
    ("missing_binds", "[agents.a.tiers.whisper]\nevery = \"15m\"\n", "agents.a.tiers.whisper.binds", "required key is missing"),
    ("missing_agents", "[log]\nlevel = \"info\"\n", "agents", "required key is missing"),
    ("unparsable", "[agents.a\nbinds = 1\n", "(file)", "expected valid TOML"),
    ("bad_duration", TIER + "every = \"15 minutes\"\n", "agents.a.tiers.whisper.every", 'expected a duration like "30s", "15m"'),
    ("bad_timezone", "[agents.a]\ntimezone = \"Mars/Olympus\"\n" + TIER.replace("[agents.a]\n", ""), "agents.a.timezone",
     "expected an IANA timezone"),
    ("cron_and_every", TIER + "cron = \"* * * * *\"\nevery = \"1m\"\n", "agents.a.tiers.whisper", "expected either cron or every, not both"),
    ("unknown_model_route", TIER + "model = \"gpt\"\n", "agents.a.tiers.whisper.model", "unknown model route 'gpt'"),
    ("unknown_source", TIER + "sources = [\"identity\", \"weather\"]\n", "agents.a.tiers.whisper.sources.1", "unknown source 'weather'"),
    ("bad_quiet_hours", "[agents.a]\nquiet_hours = \"11pm-7am\"\n" + TIER.replace("[agents.a]\n", ""), "agents.a.quiet_hours",
     'expected "HH:MM-HH:MM"'),
    ("bad_literal", "[log]\nformat = \"xml\"\n" + TIER, "log.format", "expected 'auto', 'json' or 'console', got 'xml'"),
    ("negative_timeout", "[postgres]\ncommand_timeout_s = -1\n" + TIER, "postgres.command_timeout_s", "greater than 0"),
    ("bad_model_url", "[models.m]\nbase_url = \"ftp://x\"\nmodel = \"m\"\n" + TIER, "models.m.base_url", "expected an http:// or https:// URL"),
    ("no_tiers", "[agents.a]\ntiers = {}\n", "agents.a.tiers", "expected at least one tier"),
    ("blank_workspace", "[agents.a]\nworkspace = \" \"\n" + TIER.replace("[agents.a]\n", ""), "agents.a.workspace",
     "expected the path of a git repository (relative to this file), got ' '"),
    ("zero_verify_budget", "[agents.a.verify]\nbudget_ms = 0\n" + TIER, "agents.a.verify.budget_ms", "greater than 0"),
    ("negative_head_ttl", "[agents.a.verify]\nhead_ttl_s = -1\n" + TIER, "agents.a.verify.head_ttl_s", "greater than or equal to 0"),
]


@pytest.mark.parametrize(("body", "key", "words"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_bad_config_names_file_key_and_expectation(tmp_path: Path, body: str, key: str, words: str) -> None:
    path = tmp_path / "wake.toml"
    message = config_errors.refusal(path, body)
    assert message.startswith(f"bad config in {path}: {key}: "), message
    assert words in message
    assert "\n" not in message


def test_env_override_error_names_the_variable(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(TIER)
    with pytest.raises(ConfigError) as caught:
        wake_config.load_config_file(path, environ={"WAKE_POSTGRES__COMMAND_TIMEOUT_S": "soon"})
    assert str(caught.value) == (
        f"bad config in WAKE_POSTGRES__COMMAND_TIMEOUT_S (over {path}): postgres.command_timeout_s: "
        "expected a number, got 'soon' (str)"
    )


def test_missing_explicit_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere\.toml: \(file\): expected a readable TOML file \(named by --config\)"):
        wake_config.load_config(tmp_path / "nowhere.toml")


def test_overrides_apply_in_documented_order(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text('[postgres]\ndsn = "postgresql://file/db"\n' + TIER)
    environ = {
        "DATABASE_URL": "postgresql://from-database-url/db",
        "REDIS_URL": "redis://r:6379/1",
        "NEO4J_URI": "bolt://g:7687",
        "NEO4J_AUTH": "graph/n30j-pa55word",
        "WAKE_POSTGRES__COMMAND_TIMEOUT_S": "3",
        "WAKE_AGENTS__A__TIMEZONE": "America/New_York",
        "WAKE_LOG_FORMAT": "json",
    }
    config = wake_config.load_config_file(path, environ=environ)
    assert config.postgres.dsn == "postgresql://from-database-url/db"
    assert config.redis.url == "redis://r:6379/1"
    assert config.neo4j.uri == "bolt://g:7687"
    assert config.neo4j.user == "graph"
    assert config.postgres.command_timeout_s == 3.0
    assert config.agents["a"].timezone == "America/New_York"
    assert config.log.format == "json"
    assert "n30j-pa55word" not in config.model_dump_json()  # the password is a Secret, not a config value
    # the WAKE_ override is more specific than DATABASE_URL
    environ["WAKE_POSTGRES__DSN"] = "postgresql://wake-var/db"
    assert wake_config.load_config_file(path, environ=environ).postgres.dsn == "postgresql://wake-var/db"


def test_pghost_selects_external_postgres_through_libpq_variables(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(TIER)
    assert wake_config.load_config_file(path, environ={}).postgres.dsn is None
    assert wake_config.load_config_file(path, environ={"PGHOST": "db"}).postgres.dsn == "postgresql://"


def test_lookup_order_explicit_then_env_then_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(TIER)
    b.write_text(TIER)
    monkeypatch.setenv("WAKE_CONFIG", str(b))
    assert wake_config.find_config(a) == a.resolve()
    assert wake_config.find_config(None) == b.resolve()
    monkeypatch.delenv("WAKE_CONFIG")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "wake.toml").write_text(TIER)
    assert wake_config.find_config(None) == (tmp_path / "wake.toml").resolve()
    (tmp_path / "wake.toml").unlink()
    (tmp_path / "xdg" / "wake").mkdir(parents=True)
    (tmp_path / "xdg" / "wake" / "wake.toml").write_text(TIER)
    assert wake_config.find_config(None) == (tmp_path / "xdg" / "wake" / "wake.toml").resolve()
    (tmp_path / "xdg" / "wake" / "wake.toml").unlink()
    if not Path("/etc/wake/wake.toml").exists():
        assert wake_config.find_config(None) == wake_config.EMBEDDED_DEFAULT


def test_default_schedules_and_hash(write_config: Callable[..., Path]) -> None:
    path = write_config(TIER + "[agents.a.tiers.full]\nbinds = [\"wake\"]\n")
    config = wake_config.load_config_file(path, environ={})
    assert config.schedule_of("a", "whisper") == {"every": "15m"}
    assert config.schedule_of("a", "full") == {"cron": "30 3 * * *"}
    again = wake_config.load_config_file(path, environ={})
    assert config.config_hash() == again.config_hash()
    other = wake_config.load_config_file(path, environ={"WAKE_LOG_LEVEL": "DEBUG"})
    assert other.config_hash() != config.config_hash()


def test_shipped_configs_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "config"
    default = wake_config.load_config_file(wake_config.EMBEDDED_DEFAULT, environ={})
    assert set(default.agents["demo"].tiers) == {"whisper", "surface", "full"}
    assert all(p.is_file() for p in default.persona_paths("demo"))
    example = wake_config.load_config_file(root / "wake.example.toml", environ={})
    assert example.postgres.dsn and example.redis.url and example.neo4j.uri


def test_state_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("WAKE_STATE_DIR", raising=False)
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/wake")
    assert wake_config.resolve_state_dir(None) == Path("/var/lib/wake")
    assert wake_config.resolve_state_dir(str(tmp_path)) == tmp_path
    monkeypatch.setenv("WAKE_STATE_DIR", str(tmp_path / "x"))
    assert wake_config.resolve_state_dir(str(tmp_path)) == tmp_path / "x"
    monkeypatch.delenv("WAKE_STATE_DIR")
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert wake_config.resolve_state_dir(None) == tmp_path / "xdg" / "wake"


def test_cli_bad_config_exits_78_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text("[agents.a.tiers.whisper]\nbinds = [\"nowhere\"]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKE_")}
    done = cli_fork.run([sys.executable, "-m", "wake", "--config", str(path), "doctor"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 78
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"wake: bad config in {path}: agents.a.tiers.whisper.binds.0: unknown surface 'nowhere'; "
        "expected one of chat, cli, wake, wake.full, wake.surface, wake.whisper (declare new ones in tools.surfaces)"
    ]
    assert "Traceback" not in done.stderr


def test_demo_tiers_fixture_is_valid(write_config: Callable[..., Path]) -> None:
    config = wake_config.load_config_file(write_config(DEMO_TIERS), environ={})
    assert config.agents["demo"].timezone == "Europe/Stockholm"


def test_every_problem_is_named_on_a_line_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text("[log]\nformat = \"xml\"\n[redis]\nsocket_timeout = 5\n" + TIER + "jitter_s = \"ten\"\n")
    with pytest.raises(ConfigError) as caught:
        wake_config.load_config_file(path, environ={"WAKE_POSTGRES__COMMAND_TIMEOUT_S": "soon"})
    lines = str(caught.value).split("\n")
    assert len(lines) == 4 and "more problem" not in str(caught.value)
    assert lines[0] == str(ConfigError(caught.value.source, caught.value.key, caught.value.expected))  # the first, as before
    assert all(line.startswith(("bad config in ", "  bad config in ")) for line in lines)
    named = {line.strip().split(": ")[1] for line in lines}
    assert named == {"log.format", "redis.socket_timeout", "agents.a.tiers.whisper.jitter_s", "postgres.command_timeout_s"}
    assert f"bad config in WAKE_POSTGRES__COMMAND_TIMEOUT_S (over {path}): postgres.command_timeout_s: expected a number, got 'soon' (str)" in [
        line.strip() for line in lines]


def test_cli_lists_every_config_problem_and_exits_78(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text('[log]\nformat = "xml"\n[agents.a.tiers.whisper]\nbinds = ["wake"]\nevery = "soon"\n[agents.b.tiers.wisper]\nbinds = ["wake"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKE_")}
    done = cli_fork.run(
        [sys.executable, "-m", "wake", "--config", str(path), "doctor"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 78 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"wake: bad config in {path}: ")
    assert sorted(line.strip().removeprefix("wake: ").split(": ")[1] for line in lines) == [
        "agents.a.tiers.whisper.every", "agents.b.tiers.wisper", "log.format"]


def test_workspace_is_relative_to_the_config_file_and_not_checked_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "wake.toml"
    path.parent.mkdir()
    path.write_text("[agents.a]\nworkspace = \"../src/app\"\n[agents.a.verify]\nbudget_ms = 80\n" + TIER.replace("[agents.a]\n", ""))
    config = wake_config.load_config_file(path, environ={})
    assert config.workspace_path("a") == (tmp_path / "src" / "app").resolve()  # absent on disk: the check's answer, not the config's
    assert (config.agents["a"].verify.budget_ms, config.agents["a"].verify.head_ttl_s) == (80.0, 30.0)
    bare = tmp_path / "bare.toml"
    bare.write_text(TIER)
    assert wake_config.load_config_file(bare, environ={}).workspace_path("a") is None
