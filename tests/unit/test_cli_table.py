"""The command table (`wake.cli.commands`) against the commands themselves: `wake --help` lists from
the table without importing a command, so the table must say what the commands say, name every
command `wake.cli` defines, and resolve each name to a command whose own --help works."""

from __future__ import annotations

import importlib
import pkgutil

import click
import pytest
from click.testing import CliRunner

import wake.cli
from wake.cli.app import cli
from wake.cli.commands import COMMANDS


def _loaded() -> dict[str, click.Command]:
    return {name: entry.load() for name, entry in COMMANDS.items()}


def _defined_in_cli_modules() -> set[click.Command]:
    """Every click command a `wake.cli` module defines at its top level, less the subcommands of
    its groups: what `wake` must list."""
    found: set[click.Command] = set()
    for info in pkgutil.iter_modules(wake.cli.__path__, "wake.cli."):
        module = importlib.import_module(info.name)
        found |= {value for value in vars(module).values() if isinstance(value, click.Command) and value is not cli}
    nested = {sub for group in found if isinstance(group, click.Group) for sub in group.commands.values()}
    return found - nested


def test_every_command_a_cli_module_defines_is_in_the_table() -> None:
    listed = set(_loaded().values())
    missing = sorted(c.name or "?" for c in _defined_in_cli_modules() - listed)
    assert not missing, f"commands defined in wake.cli but not in wake.cli.commands.COMMANDS: {missing}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_line_is_the_commands_own(name: str) -> None:
    command = COMMANDS[name].load()
    assert command.name == name
    assert COMMANDS[name].help == command.get_short_help_str(limit=10_000)


def test_wake_help_lists_what_a_group_of_the_real_commands_lists() -> None:
    """The lazy listing, word for word, against click's own listing of the loaded commands (same
    options, same width), so neither a line nor the cut of a line can drift."""
    eager = click.Group(cli.name, params=cli.params, help=cli.help, context_settings=cli.context_settings, commands=_loaded())
    lazy_out = CliRunner().invoke(cli, ["--help"], prog_name="wake", terminal_width=100)
    eager_out = CliRunner().invoke(eager, ["--help"], prog_name="wake", terminal_width=100)
    assert lazy_out.exit_code == 0, lazy_out.output
    assert lazy_out.output == eager_out.output
    for name in COMMANDS:
        assert f"\n  {name} " in lazy_out.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_commands_help_works_through_the_group(name: str) -> None:
    """`wake NAME --help`, resolved by the group as a run resolves it (the group's own callback,
    which configures the process's logs, is not run here; the child-interpreter tests run it)."""
    with click.Context(cli, info_name="wake") as parent:
        command = cli.get_command(parent, name)
        assert command is COMMANDS[name].load()
        with click.Context(command, info_name=name, parent=parent) as ctx:
            text = command.get_help(ctx)
    assert text.startswith(f"Usage: wake {name} [OPTIONS]")
    for param in command.params:  # every option the command has is in what its --help prints
        if isinstance(param, click.Option) and not param.hidden:
            assert param.opts[0] in text, (name, param.opts)


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["no-such-command"], prog_name="wake")
    assert result.exit_code == 2
    assert "No such command 'no-such-command'" in result.output
