"""A tools module that fails in its own code stops startup with one line naming it, exit 70."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

CLI = Callable[..., subprocess.CompletedProcess[str]]

GOOD_TOOL = (
    "from surfaces.registry import Tool\n"
    "async def h(ctx): return None\n"
    "T = Tool(name='fine', description='d', parameters={'type': 'object'}, version='1', handler=h, mutates=False, surfaces=frozenset({'wake'}))\n"
)

MODULES = {
    "raises_at_import": (
        "import os\nraise RuntimeError('no token\\nin the environment')\n",
        "tools module 'raises_at_import' raised at import: RuntimeError: no token in the environment (at {dir}/raises_at_import.py:2)",
    ),
    "bad_syntax": (
        "def register(registry:\n",
        "tools module 'bad_syntax' raised at import: SyntaxError: '(' was never closed (at {dir}/bad_syntax.py:1)",
    ),
    "register_raises": (
        GOOD_TOOL + "def register(registry):\n    registry.register(T)\n    raise KeyError('FINE_URL')\n",
        "module register_raises: register() raised KeyError: 'FINE_URL' (at {dir}/register_raises.py:6)",
    ),
    "tools_not_a_list": ("TOOLS = 5\n", "module tools_not_a_list: TOOLS must be a list of surfaces.registry.Tool, got int"),
}


@pytest.mark.parametrize("command", [("registry",), ("up", "--dry-run")], ids=["registry", "up"])
@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_failing_tools_module_is_one_line_and_exit_70(wake_cli: CLI, tmp_path: Path, module: str, command: tuple[str, ...]) -> None:
    source, says = MODULES[module]
    (tmp_path / f"{module}.py").write_text(source)
    config = tmp_path / "wake.toml"
    config.write_text(f'[tools]\nmodules = ["{module}"]\nentry_points = false\n[agents.a.tiers.whisper]\nbinds = ["wake"]\n')
    done = wake_cli("--config", str(config), *command, extra_env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 70, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.splitlines() == [f"wake: tool registry: {says.format(dir=tmp_path)}"]
