"""The embedded model without building it (issue 42, item 2): a route of `kind = "embedded"` and
what it refuses, the build's progress read from cmake's own lines, `wake model fetch` / `status`
on a cache that holds everything or nothing, and the one line (exit 69) every command that would
start a wake on an unfetched model gives before it opens a store. The build and a real wake on it:
tests/live/test_embedded_demo.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from wake.cli.app import cli
from wake.cli.model import Display
from wake.config import EMBEDDED_DEFAULT
from wake.config.sections import EMBEDDED_MODELS, ModelRoute
from wake.errors import ModelUnavailable
from wake.model import embedded
from wake.think import client as model


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "llama-cache"
    monkeypatch.setenv("WAKE_LLAMA_CACHE", str(where))
    return where


def _fill(cache: Path) -> None:
    """Stand-ins for what a fetch leaves (presence is all `status` and the checks read)."""
    for path in (embedded.server_binary(cache), embedded.tool_template(cache), embedded.model_file(cache)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def test_an_embedded_route_takes_the_small_models_settings_and_has_no_url_of_its_own() -> None:
    route = ModelRoute.model_validate({"kind": "embedded"})
    assert (route.model, route.context_window, route.tool_calls) == ("smollm2-135m", 8192, "json_schema")
    assert route.base_url is None and route.tokenizer_url is None
    assert route.extra_body == {"temperature": 0} and route.timeout_s == 300
    assert ModelRoute.model_validate({"kind": "embedded", "context_window": 4096, "tool_calls": "native"}).context_window == 4096
    for bad in ({"kind": "embedded", "base_url": "http://127.0.0.1:1/v1"}, {"kind": "embedded", "tokenizer_url": "http://127.0.0.1:1"},
                {"model": "x"}, {"kind": "ollama", "model": "x", "base_url": "http://127.0.0.1:1/v1"}):
        with pytest.raises(ValueError):
            ModelRoute.model_validate(bad)


def test_the_configs_embedded_models_are_the_ones_fetch_knows() -> None:
    assert set(EMBEDDED_MODELS) == set(embedded.MODELS)


@given(st.text(max_size=40).filter(lambda s: s not in EMBEDDED_MODELS))
def test_an_embedded_route_refuses_a_model_fetch_cannot_give(name: str) -> None:
    with pytest.raises(ValueError, match="embedded route's model is one of"):
        ModelRoute.model_validate({"kind": "embedded", "model": name})


def test_the_build_progress_is_read_from_ninjas_and_makes_lines_and_everything_is_logged(tmp_path: Path) -> None:
    seen: list[tuple[str, int | None, int | None]] = []
    log = tmp_path / "build.log"
    script = "print('[1/4] Building a'); print('[ 50%] Building b'); print('-- plain'); print('[4/4] Linking')"
    embedded._run([sys.executable, "-c", script], log, progress=lambda *a: seen.append(a), stage="build")
    assert seen == [("build", 1, 4), ("build", 50, 100), ("build", 4, 4)]
    assert "-- plain" in log.read_text() and "[4/4] Linking" in log.read_text()
    with pytest.raises(ModelUnavailable, match=r"failed \(3\); tail of") as failed:
        embedded._run([sys.executable, "-c", "print('the last words'); raise SystemExit(3)"], log)
    assert "the last words" in str(failed.value) and failed.value.exit_code == 69


def test_off_a_terminal_the_build_shows_a_line_at_each_tenth(capsys: pytest.CaptureFixture[str]) -> None:
    display = Display(tty=False)
    for done in range(207):
        display("build", done, 206)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 11 and lines[0].startswith("building llama-server: 0/206 steps (0%)") and "206/206 steps (100%)" in lines[-1]


def test_the_build_time_is_read_back_from_its_log(cache: Path) -> None:
    assert embedded.last_build_s(cache) is None
    log = embedded.server_binary(cache).parent.parent / "build.log"
    log.parent.mkdir(parents=True)
    log.write_text("$ cmake ...\nbuilt /x/llama-server in 12 s\n$ cmake ...\nbuilt /x/llama-server in 661 s\n")
    assert embedded.last_build_s(cache) == 661.0


def test_model_status_and_fetch_on_an_empty_cache_and_a_full_one(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    empty = runner.invoke(cli, ["model", "status"])
    assert empty.exit_code == 69 and "missing" in empty.output
    assert "wake: the embedded model (smollm2-135m) is not fetched" in empty.output and "run `wake model fetch`" in empty.output
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # no cmake, no compiler: the build cannot start
    embedded.toolchain_available.cache_clear()
    try:
        refused = runner.invoke(cli, ["model", "fetch"])
    finally:
        embedded.toolchain_available.cache_clear()
    assert refused.exit_code == 69 and "wake: cmake not on PATH" in refused.output, refused.output
    assert "about 11 min on 2 cores" in refused.output  # said before the build starts

    _fill(cache)
    full = runner.invoke(cli, ["model", "status"])
    assert full.exit_code == 0 and full.output.count("present") == 3, full.output
    again = runner.invoke(cli, ["model", "fetch"])
    assert again.exit_code == 0 and "already fetched: nothing to do" in again.output, again.output


def _embedded_config(tmp_path: Path) -> Path:
    persona = EMBEDDED_DEFAULT.parent / "agents" / "demo" / "persona.md"
    path = tmp_path / "wake.toml"
    path.write_text(f'[models.local]\nkind = "embedded"\n\n[agents.demo]\npersona_files = ["{persona}"]\n\n'
                    '[agents.demo.tiers.whisper]\nbinds = ["wake.whisper"]\n\n'
                    '[agents.demo.tiers.surface]\nbinds = ["wake.whisper", "wake.surface"]\nmodel = "local"\n')
    return path


def test_a_wake_on_an_unfetched_embedded_model_is_one_line_and_exit_69_before_any_store(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("WAKE_STATE_DIR", str(state))
    config = str(_embedded_config(tmp_path))
    runner = CliRunner()
    for argv in (["--config", config, "up", "--tier", "surface"], ["--config", config, "demo", "wake"],
                 ["--config", str(EMBEDDED_DEFAULT), "demo", "wake"], ["--config", config, "daemon"]):
        done = runner.invoke(cli, argv)
        lines = [line for line in done.output.splitlines() if line.startswith("wake: ")]
        assert done.exit_code == 69, (argv, done.output)
        assert len(lines) == 1 and "run `wake model fetch`" in lines[0], (argv, done.output)
    assert not (state / "postgres").exists() and not any(state.glob("**/postmaster.pid"))  # refused before any store started


async def test_the_client_refuses_an_unfetched_route_once_and_then_from_memory(cache: Path) -> None:
    route = ModelRoute.model_validate({"kind": "embedded"})
    client = model.Client()
    try:
        with pytest.raises(ModelUnavailable, match="wake model fetch") as first:
            await client.complete(route, {"messages": []})
        with pytest.raises(ModelUnavailable) as second:
            await client.count_prompt_tokens(route, {"messages": []})
        assert second.value is first.value
    finally:
        await client.aclose()
    http = ModelRoute.model_validate({"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    assert await model.Client().where(http) is http
