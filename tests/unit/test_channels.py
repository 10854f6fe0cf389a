"""Apprise routes without a network: the config refuses what cannot be sent (one line, exit 78),
a message is composed and cut to its channel, and Apprise's captured lines decide permanent from
transient."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import cli_fork
from wake import logs
from wake.config import Config, DeliveryRoute, load_config_file
from wake.daemon import channels
from wake.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
TIER = '[agents.demo.tiers.surface]\nbinds = ["wake.surface"]\ndeliver_to = ["x"]\n'


def _load(tmp_path: Path, route: str) -> Config:
    path = tmp_path / "wake.toml"
    path.write_text(f'[delivery.x]\nkind = "apprise"\n{route}\n{TIER}')
    return load_config_file(path, environ={})


@pytest.mark.parametrize(("route", "expected"), [
    ('url = "foo://bar"', "unknown Apprise scheme 'foo'://"),
    ('url = "tgram://not-a-token"', "does not parse as an Apprise tgram URL"),
    ('url = "not a url"', "expected an Apprise URL"),
    ('url = "json://host/x"\nurl_credential = "u"', "exactly one of url"),
    ("", "exactly one of url"),
    ('url = "json://host/x"\ntemplate = "{txt}"', "unknown template field 'txt'"),
    ('url = "json://host/x"\ntemplate = "{text:d}"', "the template does not render"),
    ('url = "json://host/x"\ntitle = "{text"', "expected a str.format template"),
    ('url = "json://host/x"\nmax_chars = 5', "greater than or equal to 100"),
])
def test_a_route_that_cannot_be_sent_is_refused_at_load(tmp_path: Path, route: str, expected: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, route)
    assert expected in str(refused.value) and "delivery.x" in str(refused.value)


def test_the_cli_says_one_line_and_exits_78_for_an_unknown_scheme(tmp_path: Path) -> None:
    path = tmp_path / "wake.toml"
    path.write_text(f'[delivery.x]\nkind = "apprise"\nurl = "nosuch://{"a" * 300}"\n{TIER}')
    done = cli_fork.run([sys.executable, "-m", "wake", "--config", str(path), "outbox"], capture_output=True, text=True, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, timeout=120)
    assert done.returncode == 78 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "unknown Apprise scheme 'nosuch'://" in done.stderr and "(309 characters)" in done.stderr


def test_placeholders_are_not_resolved_at_load_and_url_credential_is_for_apprise_only(tmp_path: Path) -> None:
    config = _load(tmp_path, 'url = "tgram://{tg_token}/12345"')
    assert config.delivery["x"].url == "tgram://{tg_token}/12345"
    with pytest.raises(ValueError, match="url_credential is for apprise routes"):
        DeliveryRoute(kind="webhook", url="https://h/x", url_credential="c")


def _route(**keys: object) -> DeliveryRoute:
    return DeliveryRoute.model_validate({"kind": "apprise", "url": "json://h/x", **keys})


FIELDS = {"text": "All good.", "agent": "demo", "tier": "surface", "wake_id": "w-1", "trigger": "schedule", "status": "completed",
          "settled_at": "2026-01-01T00:00:00+00:00", "link": ""}
Compose = Callable[..., channels.Message]


def test_a_channel_that_cannot_deduplicate_gets_the_wake_id_and_one_that_can_does_not() -> None:
    plain = channels.compose(_route(), FIELDS, deduplicates=True, body_max=None, title_max=None)
    marked = channels.compose(_route(), FIELDS, deduplicates=False, body_max=None, title_max=None)
    shown = channels.compose(_route(template="{text} ({wake_id})"), FIELDS, deduplicates=False, body_max=None, title_max=None)
    linked = channels.compose(_route(), {**FIELDS, "link": "https://c/wakes/w-1"}, deduplicates=False, body_max=None, title_max=None)
    assert plain == channels.Message(title="demo (surface)", body="All good.")
    assert marked.body == "All good.\n\nwake w-1" and shown.body == "All good. (w-1)"
    assert linked.body == "All good.\n\nwake w-1 · https://c/wakes/w-1"


def test_a_long_text_is_cut_to_the_smaller_limit_with_its_footer_kept() -> None:
    fields = {**FIELDS, "text": "x" * 10_000}
    by_channel = channels.compose(_route(), fields, deduplicates=False, body_max=4096, title_max=250)
    by_route = channels.compose(_route(max_chars=500), fields, deduplicates=False, body_max=4096, title_max=250)
    untitled = channels.compose(_route(max_chars=500), fields, deduplicates=False, body_max=4096, title_max=0)
    assert len(by_channel.body) == 4096 and by_channel.body.endswith("… [cut: 10000 characters]\n\nwake w-1")
    assert len(by_route.body) == 500 and by_route.body.endswith("\n\nwake w-1")
    assert len(untitled.body) + len(untitled.title) + 2 == 500  # the title goes on the body's first line there


@pytest.mark.parametrize(("entries", "permanent", "said"), [
    ([("WARNING", "Failed to send JSON POST notification: Verification Failed., error=401.")], True, "error=401"),
    ([("WARNING", "Failed to send Telegram notification: Bad Request., error=400.")], True, "error=400"),
    ([("WARNING", "Failed to send JSON POST notification: error=429.")], False, "error=429"),
    ([("WARNING", "Failed to send JSON POST notification: Servers are overloaded., error=503.")], False, "error=503"),
    ([("WARNING", "A Connection error occurred sending JSON notification to 127.0.0.1.")], False, "Connection error"),
    ([("DEBUG", "Socket Exception: {'a@b': (550, b'5.1.1 no such user')}"), ("WARNING", 'Sending email to "a@b" failed.')], True, "SMTP 550"),
    ([("DEBUG", "Socket Exception: {'a@b': (452, b'4.2.2 mailbox full')}"), ("WARNING", 'Sending email to "a@b" failed.')], False, "SMTP 452"),
    ([("WARNING", 'Connection error while submitting email to "h"'), ("DEBUG", "Socket Exception: SMTP AUTH extension not supported by server.")],
     True, "login refused"),
    ([], False, "gave no reason"),
])
def test_what_apprise_said_decides_permanent_from_transient(entries: list[tuple[str, str]], permanent: bool, said: str) -> None:
    failed = channels.failure_of(entries)
    assert failed.permanent is permanent and said in str(failed)


def test_a_resolved_url_registers_the_parts_apprise_masks_as_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TG_TOKEN", "123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0")
    target = channels.target_of(_route(url="tgram://{tg_token}/12345"))
    assert target.scheme == "tgram" and not target.deduplicates and "AAHfiqksKZ8WmR2zSjiQ7" not in target.shown
    assert logs.redact_text("id 123456789 key AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0 chat 12345") == "id *** key *** chat 12345"
