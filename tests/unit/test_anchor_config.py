"""`[anchor]` (wake/config/anchor.py): any value an operator writes is a config or one clear config error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from wake import config as wake_config
from wake.errors import ConfigError


def _toml(text: str) -> str:
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}" for c in text) + '"'


@given(url=st.text(max_size=60), ca=st.one_of(st.none(), st.text(min_size=1, max_size=20)), daemon=st.booleans())
def test_anchor_keys_are_a_config_error_or_a_config(write_config: Callable[..., Path], url: str, ca: str | None, daemon: bool) -> None:
    body = f"[anchor]\ntsa_url = {_toml(url)}\ndaemon = {'true' if daemon else 'false'}\n" + (f"ca_file = {_toml(ca)}\n" if ca else "")
    path = write_config(body + '[agents.demo]\npersona_files = ["persona.md"]\n[agents.demo.tiers.full]\nbinds = ["wake"]\n')
    try:
        loaded = wake_config.load_config_file(path, environ={})
    except ConfigError as exc:
        assert "anchor" in str(exc) and "Traceback" not in str(exc)
        return
    assert loaded.anchor.tsa_url == url and url.startswith(("http://", "https://")) and ca is not None
