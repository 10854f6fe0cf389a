"""Secrets: read from systemd credentials first, then the environment; never logged.

A credential named `openrouter_api_key` is read from `$CREDENTIALS_DIRECTORY/openrouter_api_key`
(systemd `LoadCredential=`), else from the environment variable `OPENROUTER_API_KEY`. Whatever is
read is registered with the log redaction processor before it is returned.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from wake import logs


class Secret:
    """A string that does not print itself."""

    __slots__ = ("_value", "origin")

    def __init__(self, value: str, origin: str) -> None:
        self._value = value
        self.origin = origin
        logs.register_secret(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret(origin={self.origin!r}, value='***')"

    __str__ = __repr__


def env_name(credential: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", credential).upper()


def read_secret(credential: str) -> Secret | None:
    directory = os.environ.get("CREDENTIALS_DIRECTORY")
    if directory:
        path = Path(directory) / credential
        if path.is_file():
            return Secret(path.read_text(encoding="utf-8").strip(), f"credential {credential}")
    value = os.environ.get(env_name(credential))
    if value:
        return Secret(value.strip(), f"environment {env_name(credential)}")
    return None
