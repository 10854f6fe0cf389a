"""The `wake` entry point. The group and the helpers every command shares are in `wake.cli.app`;
the commands are listed in `wake.cli.commands` and each lives in its own module, imported when it
runs."""

from __future__ import annotations

import os
import sys

from wake.cli.app import cli


def main() -> None:
    # Owner-only state: every file wake, its engines (which inherit it) and git create is 0600, every
    # directory 0700 (docs/isolation.md, "Owner-only state").
    os.umask(0o077)
    cli(args=hoist_config(sys.argv[1:]), prog_name="wake")


def hoist_config(args: list[str]) -> list[str]:
    """`--config F` is the group's option; accept it after the subcommand too (`wake ledger
    --config F`) by moving it to the front. Nothing after a `--` is an option."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg == "--config" and i + 1 < len(args):
            front += args[i : i + 2]
            i += 2
            continue
        if arg.startswith("--config="):
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest
