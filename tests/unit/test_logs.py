"""Logs: one configuration, JSON or console, stdlib loggers through the same renderer, redaction."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import structlog
import structlog.testing

from wake import logs, secrets

API_KEY = "sk-or-v1-0123456789abcdefdeadbeef"


@pytest.fixture(autouse=True)
def _restore_logging() -> object:
    yield
    logging.getLogger().handlers[:] = []


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_with_stable_event_names_and_bound_context() -> None:
    out = io.StringIO()
    logs.configure("json", "info", stream=out)
    logs.get().bind(agent="demo", tier="whisper", wake_id="w1").info("wake.started", trigger="manual")
    [line] = _lines(out)
    assert line["event"] == "wake.started"
    assert (line["agent"], line["tier"], line["wake_id"], line["trigger"]) == ("demo", "whisper", "w1", "manual")
    assert line["level"] == "info" and line["timestamp"].endswith("Z")


def test_a_module_logger_is_assembled_once_per_configuration_and_follows_every_change(monkeypatch: pytest.MonkeyPatch) -> None:
    # A module's logger is made at import, before `configure`; it logs under whatever is
    # configured at each call (a level, a stream, a capture), assembling a logger only when that changed.
    log = logs.get("tests.module")
    assembled: list[str] = []
    get_logger = structlog.get_logger

    def counted(*args: object, **kwargs: object) -> object:
        assembled.append(str(args[0]) if args else "")
        return get_logger(*args, **kwargs)

    monkeypatch.setattr(structlog, "get_logger", counted)
    first, second = io.StringIO(), io.StringIO()
    logs.configure("json", "info", stream=first)
    for n in range(5):
        log.info("one", n=n)
    assert [line["n"] for line in _lines(first)] == [0, 1, 2, 3, 4] and assembled == ["tests.module"]
    logs.configure("json", "warning", stream=second)
    log.info("below the level")
    log.warning("two")
    assert [line["event"] for line in _lines(second)] == ["two"] and len(assembled) == 2
    with structlog.testing.capture_logs() as captured:
        log.warning("three", k=1)
    assert captured == [{"event": "three", "k": 1, "log_level": "warning"}] and len(assembled) == 2
    log.warning("four")
    assert [line["event"] for line in _lines(second)] == ["two", "four"] and first.getvalue().count("\n") == 5


def test_stdlib_loggers_come_out_through_the_same_renderer() -> None:
    out = io.StringIO()
    logs.configure("json", "info", stream=out)
    logging.getLogger("apscheduler.scheduler").warning("Run time of job %s was missed", "j1")
    logging.getLogger("httpx").info("below the floor for library loggers")
    [line] = _lines(out)
    assert line["event"] == "Run time of job j1 was missed"
    assert line["logger"] == "apscheduler.scheduler"


def test_console_format_is_not_json() -> None:
    out = io.StringIO()
    logs.configure("console", "info", stream=out)
    logs.get().info("gate.quiet", agent="demo")
    text = out.getvalue()
    assert "gate.quiet" in text and "agent" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_configured_key_never_appears_tracebacks_included(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "openrouter_api_key").write_text(API_KEY + "\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    secret = secrets.read_secret("openrouter_api_key")
    assert secret is not None and secret.reveal() == API_KEY
    out = io.StringIO()
    logs.configure("json", "debug", stream=out)
    log = logs.get()
    log.info("model.request", api_key=API_KEY, headers={"Authorization": f"Bearer {API_KEY}"})
    log.info("model.note", text=f"the key is {API_KEY} and {secret!r}")
    log.info("store.connect", dsn="postgresql://wake:hunter2secret@db:5432/wake")
    try:
        raise RuntimeError(f"provider rejected key {API_KEY}")
    except RuntimeError:
        log.exception("model.failed")
    try:
        raise ValueError(f"Authorization: Bearer {API_KEY}")
    except ValueError:
        logging.getLogger("httpx").exception("stdlib traceback")
    text = out.getvalue()
    assert API_KEY not in text
    assert "hunter2secret" not in text
    assert "Traceback" in text and "RuntimeError" in text
    assert text.count(logs.REDACTED) >= 5
    lines = _lines(out)
    assert lines[2]["dsn"] == "postgresql://wake:***@db:5432/wake"


def test_console_traceback_is_redacted_too() -> None:
    logs.register_secret("console-secret-value-42")
    out = io.StringIO()
    logs.configure("console", "info", stream=out)
    try:
        raise KeyError("console-secret-value-42")
    except KeyError:
        logs.get().exception("boom")
    assert "console-secret-value-42" not in out.getvalue()
    assert "KeyError" in out.getvalue()


def test_secret_lookup_prefers_credentials_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    monkeypatch.setenv("MODEL_KEY", "from-environment")
    found = secrets.read_secret("model_key")
    assert found is not None and found.reveal() == "from-environment" and found.origin == "environment MODEL_KEY"
    (tmp_path / "model_key").write_text("from-credentials")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    found = secrets.read_secret("model_key")
    assert found is not None and found.reveal() == "from-credentials"
    assert "from-credentials" not in repr(found) and "from-credentials" not in str(found)
    monkeypatch.delenv("MODEL_KEY")
    assert secrets.read_secret("absent_key") is None
