"""Config load refuses what would break later: paths in agent ids, overflowing durations, URLs without
a host, and echoes every value clipped. Each case is one line naming the key, exit 78 from the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import cli_fork, config_errors
from wake import config as wake_config
from wake.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
TIER = '[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\n'

REFUSED: list[tuple[str, str, str, str]] = [
    # (id, toml body, key path, words)
    ("agent_id_path", '[agents."../../x".tiers.whisper]\nbinds = ["wake.whisper"]\n', "agents", "expected an agent id of 1 to 64 letters"),
    ("agent_id_empty", '[agents."".tiers.whisper]\nbinds = ["wake.whisper"]\n', "agents", "got ''"),
    ("agent_id_dot", '[agents."a.b".tiers.whisper]\nbinds = ["wake.whisper"]\n', "agents", "got 'a.b'"),
    ("agent_id_long", f'[agents.{"a" * 65}.tiers.whisper]\nbinds = ["wake.whisper"]\n', "agents", "(65 characters)"),
    ("every_overflow", TIER + 'every = "99999999999999999999d"\n', "agents.a.tiers.whisper.every", "at most 3650d"),
    ("every_too_long", TIER + 'every = "3651d"\n', "agents.a.tiers.whisper.every", "at most 3650d"),
    ("jitter_overflow", TIER + "jitter_s = 1e23\n", "agents.a.tiers.whisper.jitter_s", "got 1e+23"),
    ("jitter_huge", TIER + "jitter_s = 1e15\n", "agents.a.tiers.whisper.jitter_s", "at most 3.1536e+08 (ten years)"),
    ("lease_ttl_inf", "[daemon]\nlease_ttl_s = inf\n" + TIER, "daemon.lease_ttl_s", "finite number"),
    ("lease_ttl_nan", "[daemon]\nlease_ttl_s = nan\n" + TIER, "daemon.lease_ttl_s", "finite number"),
    ("timeout_huge", "[postgres]\ncommand_timeout_s = 1e300\n" + TIER, "postgres.command_timeout_s", "at most"),
    ("ms_huge", TIER + "source_timeout_ms = 1e15\n", "agents.a.tiers.whisper.source_timeout_ms", "at most"),
    ("days_huge", "[retractions]\nfalsifier_maturity_days = 100000\n" + TIER, "retractions.falsifier_maturity_days", "at most 3650"),
    ("webhook_no_host", '[delivery.w]\nkind = "webhook"\nurl = "http://"\n' + TIER, "delivery.w", "a webhook route needs url"),
    ("webhook_spaces", '[delivery.w]\nkind = "webhook"\nurl = "https://exa mple .com/ho ok"\n' + TIER, "delivery.w",
     "got 'https://exa mple .com/ho ok'"),
    ("webhook_path_space", '[delivery.w]\nkind = "webhook"\nurl = "https://example.com/ho ok"\n' + TIER, "delivery.w", "with a host"),
    ("model_url_no_host", '[models.m]\nbase_url = "https://"\nmodel = "m"\n' + TIER, "models.m.base_url", "with a host"),
    ("approval_ttl_zero", "[tools]\napproval_ttl = 0\n" + TIER, "tools.approval_ttl", "expected a positive number of seconds"),
    ("approval_ttl_negative", "[tools]\napproval_ttl = -1\n" + TIER, "tools.approval_ttl", "expected a positive number of seconds"),
    ("approval_ttl_huge", "[tools]\napproval_ttl = 9223372036854775807\n" + TIER, "tools.approval_ttl", "at most 3650d"),
    ("approval_ttl_word", '[tools]\napproval_ttl = "a week"\n' + TIER, "tools.approval_ttl", 'expected a duration like "30s"'),
    ("approval_ttl_bool", "[tools]\napproval_ttl = true\n" + TIER, "tools.approval_ttl", "expected a number of seconds"),
    ("sentinel_no_port", '[redis]\nsentinels = ["s1"]\nmaster_name = "m"\n' + TIER, "redis.sentinels", "expected HOST:PORT"),
    ("sentinel_port_zero", '[redis]\nsentinels = ["s1:0"]\nmaster_name = "m"\n' + TIER, "redis.sentinels", "a port from 1 to 65535"),
    ("sentinel_twice", '[redis]\nsentinels = ["s1:26379", "s1:26379"]\nmaster_name = "m"\n' + TIER, "redis.sentinels", "each sentinel once"),
    ("sentinels_no_name", '[redis]\nsentinels = ["s1:26379"]\n' + TIER, "redis", "sentinels and master_name together"),
    ("name_no_sentinels", '[redis]\nmaster_name = "m"\n' + TIER, "redis", "sentinels and master_name together"),
    ("sentinels_and_url", '[redis]\nurl = "redis://r:6379/0"\nsentinels = ["s1:26379"]\nmaster_name = "m"\n' + TIER, "redis",
     "either url or sentinels"),
    ("master_name_space", '[redis]\nsentinels = ["s1:26379"]\nmaster_name = "my primary"\n' + TIER, "redis.master_name", "(no spaces)"),
    ("sentinels_not_a_list", '[redis]\nsentinels = "s1:26379"\nmaster_name = "m"\n' + TIER, "redis.sentinels", "expected an array"),
    ("password_with_url", '[redis]\nurl = "redis://r:6379/0"\npassword_credential = "p"\n' + TIER, "redis", "only with sentinels"),
    ("credential_a_path", '[redis]\nsentinels = ["s1:26379"]\nmaster_name = "m"\nsentinel_password_credential = "../etc/passwd"\n' + TIER,
     "redis.sentinel_password_credential", "expected a credential's name"),
]


@pytest.mark.parametrize(("body", "key", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_at_load(tmp_path: Path, body: str, key: str, words: str) -> None:
    path = tmp_path / "wake.toml"
    message = config_errors.refusal(path, body)
    assert message.startswith(f"bad config in {path}: {key}: "), message
    assert words in message, message
    assert "\n" not in message and len(message) < 400, message


@pytest.mark.parametrize("agent_id", ["a", "demo", "Bob_2", "x-y", "A" * 64])
def test_agent_ids_of_the_pattern_load(tmp_path: Path, agent_id: str) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(f'[agents.{agent_id}.tiers.whisper]\nbinds = ["wake.whisper"]\nevery = "3650d"\njitter_s = 86400\n')
    config = wake_config.load_config_file(path, environ={})
    assert list(config.agents) == [agent_id]
    assert config.memory_path(agent_id).parent == config.state_dir_path() / "memory"


def test_a_huge_timezone_is_a_short_line_with_its_length(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    zone = "Z" * 10_000_000
    path.write_text(f'[agents.a]\ntimezone = "{zone}"\n' + TIER)
    with pytest.raises(ConfigError) as caught:
        wake_config.load_config_file(path, environ={})
    message = str(caught.value)
    assert message.startswith(f"bad config in {path}: agents.a.timezone: expected an IANA timezone"), message[:300]
    assert "(10000000 characters)" in message and len(message) < 400


def test_a_huge_agent_id_key_is_clipped(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(f'[agents.{"b" * 100_000}]\ntimezone = "Nowhere/Else"\n[agents.{"b" * 100_000}.tiers.whisper]\nbinds = ["wake.whisper"]\n')
    with pytest.raises(ConfigError) as caught:
        wake_config.load_config_file(path, environ={})
    assert "(100000 characters)" in str(caught.value) and len(str(caught.value)) < 400


def test_pydantic_echoes_are_clipped(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(TIER + f'jitter_s = "{"9x" * 50_000}"\n')
    with pytest.raises(ConfigError) as caught:
        wake_config.load_config_file(path, environ={})
    assert "expected an integer" in str(caught.value) and "(100000 characters)" in str(caught.value)
    assert len(str(caught.value)) < 400


def test_an_overflowing_override_names_its_variable(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(TIER)
    with pytest.raises(ConfigError) as caught:
        wake_config.load_config_file(path, environ={"WAKE_DAEMON__LEASE_TTL_S": "inf"})
    assert str(caught.value).startswith(f"bad config in WAKE_DAEMON__LEASE_TTL_S (over {path}): daemon.lease_ttl_s: ")


def _wake(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "XDG_", "NEO4J_", "REDIS_URL", "DATABASE_URL"))}
    env.update(PYTHONPATH=str(REPO), WAKE_STATE_DIR=str(tmp_path / "state"))
    return cli_fork.run([sys.executable, "-m", "wake", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_cli_exit_78_one_line_and_nothing_created(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text('[agents."../../escape"]\ntimezone = "UTC"\n[agents."../../escape".tiers.whisper]\nbinds = ["wake.whisper"]\n')
    done = _wake(tmp_path, "--config", str(path), "up", "--dry-run")
    assert done.returncode == 78, done.stderr
    assert done.stderr.count("\n") == 1 and "expected an agent id" in done.stderr
    assert not (tmp_path / "state").exists() and not (tmp_path.parent / "escape").exists()


@pytest.mark.parametrize("agent_id", ["../../x", "", "a" * 100_000])
def test_cli_agent_argument_follows_the_pattern(tmp_path: Path, agent_id: str) -> None:
    done = _wake(tmp_path, "--config", str(wake_config.EMBEDDED_DEFAULT), "ledger", "--agent", agent_id)
    assert done.returncode == 2, done.stderr
    assert "expected an agent id of 1 to 64 letters" in done.stderr and len(done.stderr) < 600
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(("written", "seconds"), [(None, 7 * 86400), ("604800", 604800), ('"7d"', 604800), ('"12h"', 43200), ("90", 90)])
def test_approval_ttl_is_seconds_or_a_duration(tmp_path: Path, written: str | None, seconds: int) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(("" if written is None else f"[tools]\napproval_ttl = {written}\n") + TIER)
    assert wake_config.load_config_file(path, environ={}).tools.approval_ttl == seconds


def test_sentinels_load_as_pairs_and_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text('[redis]\nsentinels = ["10.0.0.1:26379", "[::1]:26380", "s3.internal:26381"]\nmaster_name = "wake"\n' + TIER)
    redis = wake_config.load_config_file(path, environ={}).redis
    assert redis.url is None and redis.master_name == "wake"
    assert redis.sentinel_addresses() == [("10.0.0.1", 26379), ("::1", 26380), ("s3.internal", 26381)]
    path.write_text(TIER)
    environ = {"WAKE_REDIS__SENTINELS": '["s1:26379"]', "WAKE_REDIS__MASTER_NAME": "wake"}
    assert wake_config.load_config_file(path, environ=environ).redis.sentinel_addresses() == [("s1", 26379)]
    with pytest.raises(ConfigError, match="either url or sentinels"):  # REDIS_URL over a file's sentinels: one way in, said
        wake_config.load_config_file(path, environ={**environ, "REDIS_URL": "redis://r:6379/0"})


def _toml(text: str) -> str:
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}" for c in text) + '"'


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sentinels=st.lists(st.one_of(st.text(max_size=30), st.from_regex(r"\A[a-z0-9.]{1,12}:[0-9]{1,6}\Z")), max_size=4),
       name=st.one_of(st.none(), st.text(max_size=20)), url=st.booleans(),
       credential=st.one_of(st.none(), st.text(max_size=20), st.sampled_from(["redis_password", "a.b-c_1"])))
def test_redis_keys_are_a_config_error_or_a_config(
    tmp_path: Path, sentinels: list[str], name: str | None, url: bool, credential: str | None,
) -> None:
    body = "[redis]\n" + (f"sentinels = [{', '.join(map(_toml, sentinels))}]\n" if sentinels else "")
    body += (f"master_name = {_toml(name)}\n" if name is not None else "") + ('url = "redis://r:6379/0"\n' if url else "")
    body += f"password_credential = {_toml(credential)}\n" if credential is not None else ""
    path = tmp_path / "wake.toml"
    path.write_text(body + TIER)
    try:
        loaded = wake_config.load_config_file(path, environ={}).redis
    except ConfigError as exc:
        lines = str(exc).split("\n  ")  # one line per problem, each naming its key (wake.config.messages)
        assert all(line.startswith(f"bad config in {path}: redis") and "\n" not in line and len(line) < 400 for line in lines), lines
        return
    assert bool(loaded.sentinels) == (loaded.master_name is not None) and not (loaded.sentinels and loaded.url)
    if loaded.password_credential is not None:  # a bare name: no path, no separator, only with sentinels
        assert loaded.sentinels and "/" not in loaded.password_credential and loaded.password_credential not in (".", "..")
    # each listed address as parsed (a port's leading zeros are the same port: "0:01" is ("0", 1))
    listed = [s.strip().rsplit(":", 1) for s in sentinels]
    assert loaded.sentinel_addresses() == [(h[1:-1] if h.startswith("[") else h, int(p)) for h, p in listed]
    assert all(0 < p <= 65535 for _, p in loaded.sentinel_addresses()) and len(set(sentinels)) == len(sentinels)
