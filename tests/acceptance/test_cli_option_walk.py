"""Every numeric option and argument of every command, and every URL key of the config, walked
from the click command tree and the config's models (so a new one is covered without editing this
file): 0, -1 and 2**63 (and inf, nan for seconds) each give one line, the documented exit (2 for
usage, 78 for configuration), no traceback. 2**63 is past every column and every bound, so it is
always a usage error, before any store is opened (issue 41: `wake memory ack 99999999999999999999999`
and `wake outbox --retry 99999999999999999999999` were int64 DataErrors). A URL of the wrong scheme
(`[redis] url = "mongodb://x"`, `REDIS_URL=mongodb://x`) is one line and exit 78."""

from __future__ import annotations

import concurrent.futures
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pydantic
import pytest

from wake.cli.app import AgentIdType
from wake.cli.commands import COMMANDS
from wake.config import Config

CLI = Callable[..., subprocess.CompletedProcess[str]]
AGENTS = '[agents.demo]\n[agents.demo.tiers.whisper]\nevery = "15m"\nbinds = ["wake.whisper"]\n'
NUMERIC = (click.types.IntParamType, click.types.FloatParamType)


def _commands() -> Iterator[tuple[list[str], click.Command]]:
    def walk(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
        if isinstance(cmd, click.Group):
            for name, sub in sorted(cmd.commands.items()):
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd

    for name, entry in sorted(COMMANDS.items()):
        yield from walk(entry.load(), [name])


def _filler(param: click.Parameter) -> str:
    if isinstance(param.type, NUMERIC):
        return "1"
    if isinstance(param.type, AgentIdType):
        return "demo"
    if isinstance(param.type, click.Choice):
        return str(param.type.choices[0])
    return "x"


def _argv(path: list[str], cmd: click.Command, target: click.Parameter, value: str) -> list[str]:
    """The command with `value` for `target` and a plain value for every other required parameter."""
    args: list[str] = []
    opts: list[str] = []
    for param in cmd.params:
        given = value if param is target else _filler(param) if param.required else None
        if given is None:
            continue
        if isinstance(param, click.Argument):
            args.append(given)
        elif isinstance(param, click.Option) and not param.is_flag:
            opts += [param.opts[0], given]
    return [*path, *opts, "--", *args] if args else [*path, *opts]


def _numeric_params() -> list[tuple[list[str], click.Command, click.Parameter]]:
    return [(path, cmd, p) for path, cmd in _commands() for p in cmd.params if isinstance(p.type, NUMERIC)]


def _one_line(done: subprocess.CompletedProcess[str], statuses: tuple[int, ...], what: str) -> None:
    assert done.returncode in statuses, (what, done.returncode, done.stderr[-1500:])
    assert "Traceback" not in done.stderr, (what, done.stderr[-3000:])
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith(("wake:", "Error:"))]
    assert len(lines) == 1, (what, done.stderr[-1500:])
    assert len(lines[0]) < 400, (what, lines[0][:500])


def test_the_walk_finds_the_options_of_the_issue() -> None:
    found = {(" ".join(path), p.name) for path, _, p in _numeric_params()}
    assert {("memory ack", "finding_ids"), ("outbox", "retry_id"), ("memory revert", "finding_id")} <= found


def test_every_numeric_option_refuses_0_minus_1_and_2_to_the_63_in_one_line(wake_cli: CLI, tmp_path: Path) -> None:
    # a config that fails to load: a value the option accepts reaches it (78) and nothing else
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[redis]\nurl = "mongodb://x"\n{AGENTS}')
    cases = [
        (_argv(path, cmd, param, value), value)
        for path, cmd, param in _numeric_params()
        for value in ("0", "-1", str(2**63), *(("inf", "nan") if isinstance(param.type, click.types.FloatParamType) else ()))
    ]
    # each in its own process, three at a time (none opens a store: the config fails to load first),
    # so the interpreters fill the cores a second worker leaves idle
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        runs = list(pool.map(lambda case: wake_cli("--config", str(bad), *case[0]), cases))
    for (argv, value), done in zip(cases, runs, strict=True):
        what = f"wake {' '.join(argv)}"
        if value == str(2**63) or value in ("inf", "nan"):
            _one_line(done, (2,), what)  # past every bound: usage, before the config is read
        else:
            _one_line(done, (2, 78), what)
    assert len(runs) >= 3 * 10


def test_the_cases_of_the_issue_are_one_line_before_any_store(wake_cli: CLI, store_config: Callable[..., Config]) -> None:
    config = store_config(agents=AGENTS)
    cfg = ("--config", str(config.path))
    huge = "99999999999999999999999"
    _one_line(wake_cli(*cfg, "memory", "ack", huge, "--by", "ada"), (2,), "memory ack")
    _one_line(wake_cli(*cfg, "outbox", "--retry", huge), (2,), "outbox --retry")
    _one_line(wake_cli(*cfg, "memory", "revert", "--finding", huge, "--by", "ada"), (2,), "memory revert --finding")
    for by in ("", "   ", "a\nb"):
        done = wake_cli(*cfg, "pause", "demo", "--by", by)
        _one_line(done, (2,), f"pause --by {by!r}")
        assert "--by" in done.stderr


def _url_keys() -> list[tuple[str, str]]:
    """(section, key) of every top-level section's URL-like key (named *url, *dsn or *uri)."""
    keys = []
    for section, field in Config.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, pydantic.BaseModel):
            keys += [(section, key) for key in model.model_fields if key.endswith(("url", "dsn", "uri"))]
    return keys


@pytest.mark.parametrize("variable", ["REDIS_URL", "DATABASE_URL", "NEO4J_URI", *(f"WAKE_{s.upper()}__{k.upper()}" for s, k in _url_keys())])
def test_a_url_of_the_wrong_scheme_is_one_line_and_exit_78(wake_cli: CLI, store_config: Callable[..., Config], variable: str) -> None:
    config = store_config(agents=AGENTS)
    done = wake_cli("--config", str(config.path), "status", extra_env={variable: "mongodb://x"})
    _one_line(done, (78,), variable)
    assert "mongodb://x" in done.stderr


def test_the_url_walk_covers_every_store() -> None:
    assert {("postgres", "dsn"), ("redis", "url"), ("neo4j", "uri"), ("console", "url")} <= set(_url_keys())
