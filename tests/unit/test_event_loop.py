"""The loop a command body runs on (`wake.cli.app.run_async`): asyncio's by default, uvloop for the
daemon (`daemon.event_loop`), and one line with the config's exit status when uvloop is missing."""

from __future__ import annotations

import asyncio
import sys

import pytest

from wake.cli import app
from wake.config import DaemonConfig
from wake.errors import ConfigError


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__.partition(".")[0]


def test_the_daemon_defaults_to_uvloop_and_other_commands_run_on_asyncio() -> None:
    assert DaemonConfig().event_loop == "uvloop"
    assert app.run_async(_loop_module) == "asyncio"
    assert app.run_async(_loop_module, event_loop="uvloop") == "uvloop"
    assert app.run_async(_loop_module, event_loop="asyncio") == "asyncio"


def test_an_unknown_loop_is_refused_by_the_config() -> None:
    with pytest.raises(ValueError, match="event_loop"):
        DaemonConfig(event_loop="trio")  # type: ignore[arg-type]


def test_uvloop_missing_is_one_line_and_the_config_s_exit_status(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` now raises ImportError
    ran: list[bool] = []

    async def body() -> None:
        ran.append(True)

    with pytest.raises(SystemExit) as exited:
        app.run_async(body, event_loop="uvloop", source="/etc/wake/wake.toml")
    assert exited.value.code == ConfigError.exit_code == 78
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith('wake: bad config in /etc/wake/wake.toml: daemon.event_loop: "uvloop", but uvloop cannot be imported'), err
    assert 'install it, or set "asyncio"' in err
    assert ran == []  # nothing ran
