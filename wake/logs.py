"""Structured logs, configured once.

JSON lines on stdout when stdout is not a terminal (journald, a pipe to `jq`), a console renderer
on a terminal; `WAKE_LOG_FORMAT=json|console` forces either. The standard-library loggers of
apscheduler, asyncpg, neo4j and httpx come out through the same renderer. A redaction processor
runs last before rendering, over every string, tracebacks included: API keys, Authorization
headers, DSN passwords and every secret wake has read are replaced by `***`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
from collections.abc import MutableMapping
from typing import Any, TextIO, cast

import structlog

REDACTED = "***"
_SENSITIVE_KEYS = re.compile(r"(api[_-]?key|authorization|password|passwd|secret|token)$", re.IGNORECASE)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:password@host  ->  scheme://user:***@host
    (re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+(?P<tail>@)", re.IGNORECASE), rf"\g<head>{REDACTED}\g<tail>"),
    (re.compile(r"(?P<head>\bauthorization\b[\"']?\s*[:=]\s*[\"']?)(bearer\s+|basic\s+)?[^\s\"',}]+", re.IGNORECASE), rf"\g<head>{REDACTED}"),
    (re.compile(r"(?P<head>\bbearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE), rf"\g<head>{REDACTED}"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"(?P<head>[?&](password|api_key|apikey|token)=)[^&\s]+", re.IGNORECASE), rf"\g<head>{REDACTED}"),
)
_STD_LOGGERS = ("apscheduler", "asyncpg", "neo4j", "httpx", "httpcore", "pgserver", "tenacity")

_secrets: set[str] = set()
_secrets_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Every later log line has this exact value replaced by `***`."""
    if value and len(value) >= 4:
        with _secrets_lock:
            _secrets.add(value)


def redact_text(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    with _secrets_lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def _redact_value(key: str, value: object) -> object:
    if isinstance(value, str):
        if _SENSITIVE_KEYS.search(key) and value:
            return REDACTED
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redact_value(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_value(key, v) for v in value]
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return redact_text(str(value))


def redact_data(value: object) -> object:
    """A JSON-like value under the same rules as a log line: the string under a sensitive key is
    `***`, every other string is redacted as text (the transcript of a wake uses this)."""
    return _redact_value("", value)


def redact(_logger: object, _method: str, event_dict: MutableMapping[str, object]) -> MutableMapping[str, object]:
    """structlog processor: redact every field, the event and the formatted traceback included."""
    for key in list(event_dict):
        if key.startswith("_"):
            continue
        event_dict[key] = _redact_value(key, event_dict[key])
    return event_dict


def _stdlib_name(_logger: object, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, object]:
    record = event_dict.get("_record")
    if record is not None:
        event_dict.setdefault("logger", record.name)
    return event_dict


def wake_fields(*, agent: str, tier: str, wake_id: str) -> contextlib.AbstractContextManager[object]:
    """While it is open, every log line of this context (and of the tasks it starts, which copy
    it) carries the wake's `agent`, `tier` and `wake_id`; closing it restores what was bound before."""
    return structlog.contextvars.bound_contextvars(agent=agent, tier=tier, wake_id=wake_id)


def quieter(level: str) -> str:
    """`level`, raised to warning: a one-shot command's logs on a terminal, where its output says the rest."""
    return level if getattr(logging, level.upper()) >= logging.WARNING else "warning"


def configure(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog and the stdlib loggers once; calling again reconfigures."""
    stream = stream or sys.stdout
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=stream.isatty(), exception_formatter=structlog.dev.plain_traceback)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[_stdlib_name, *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, redact, renderer],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    numeric = getattr(logging, level.upper())
    root.setLevel(numeric)
    for name in _STD_LOGGERS:
        # Their INFO chatter is not an operator's concern; warnings and errors come through.
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        cache_logger_on_first_use=False,
    )


class _Logger:
    """A module's logger (`get`), assembled once per configuration.

    structlog's lazy proxy assembles a new bound logger at every call (a logger from the factory,
    a context, the wrapper) unless it caches on first use, and a cached one would outlive a later
    `configure` (the CLI configures again once it knows the format; a test captures). This one
    keeps the logger it assembled with what it was assembled from, and assembles again when any
    of those is no longer the configured one. `structlog.testing.capture_logs` keeps the
    processors' list and changes what it holds, which a kept logger sees."""

    __slots__ = ("_name", "_bound", "_built_from")

    def __init__(self, name: str) -> None:
        self._name = name
        self._bound: Any = None
        self._built_from: tuple[object, ...] = ()

    def _logger(self) -> Any:
        config = structlog.get_config()
        key = (config["processors"], config["wrapper_class"], config["logger_factory"], config["context_class"])
        if not self._built_from or any(a is not b for a, b in zip(key, self._built_from, strict=True)):
            self._bound, self._built_from = structlog.get_logger(self._name).bind(), key
        return self._bound

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._logger(), attr)


def get(name: str = "wake") -> structlog.typing.FilteringBoundLogger:
    """The logger of `name`: every call of its methods goes to the logger the configuration in
    force gives (`_Logger`)."""
    return cast(structlog.typing.FilteringBoundLogger, _Logger(name))
