"""A config the loader must refuse, from a test: write it, load it, and return the one message."""

from __future__ import annotations

from pathlib import Path

import pytest

from wake import config as wake_config
from wake.errors import ConfigError


def refusal(path: Path, body: str, environ: dict[str, str] | None = None) -> str:
    """Write `body` to `path` and load it (with `environ`, none by default): the ConfigError's message."""
    path.write_text(body)
    with pytest.raises(ConfigError) as caught:
        wake_config.load_config_file(path, environ=environ or {})
    return str(caught.value)
