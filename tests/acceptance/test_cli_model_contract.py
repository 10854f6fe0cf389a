"""A route or a tool that a real model server cannot take stops `wake` before any wake: one line."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

CLI = Callable[..., subprocess.CompletedProcess[str]]


def test_extra_body_setting_wakes_own_fields_is_a_bad_config(wake_cli: CLI, tmp_path: Path) -> None:
    config = tmp_path / "wake.toml"
    config.write_text(
        '[models.m]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\nextra_body = { tools = [], temperature = 0 }\n'
        '[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\nmodel = "m"\n'
    )
    done = wake_cli("--config", str(config), "up")
    assert done.returncode == 78, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"wake: bad config in {config}: models.m.extra_body: tools is set by wake itself and cannot be overridden here"
    )


def test_a_tool_pattern_grammar_compilers_cannot_take_stops_startup(wake_cli: CLI, tmp_path: Path) -> None:
    (tmp_path / "datedtools.py").write_text(
        "from surfaces.registry import Tool\n"
        "async def h(ctx, day): return day\n"
        "TOOLS = [Tool(name='dated', description='d', version='1', handler=h, mutates=False, surfaces=frozenset({'wake'}),\n"
        "              parameters={'type': 'object', 'properties': {'day': {'type': 'string', 'pattern': r'^\\d{4}$'}}})]\n"
    )
    config = tmp_path / "wake.toml"
    config.write_text('[tools]\nmodules = ["datedtools"]\n[agents.a.tiers.whisper]\nbinds = ["wake"]\n')
    done = wake_cli("--config", str(config), "up", extra_env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 70, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    expected = "wake: tool registry: tool 'dated' (module datedtools): parameters.properties.day.pattern '^\\\\d{4}$' uses \\d (write [0-9])"
    assert last.startswith(expected), last
