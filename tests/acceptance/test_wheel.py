"""The wheel works (issue 42): built from a copy of the source tree, installed into a fresh venv
outside the checkout, `wake up` runs on the embedded default (package data: the config and the
persona beside it), then a newcomer's first steps with an MCP server configured: `wake registry`,
`wake up --tier surface`, `wake show --transcript` and one page of `wake console`; and, when the
embedded model is in the cache, `wake model fetch` and `wake demo wake`: a surface wake with a model
turn and a tool call.

No network: the wheel is built without build isolation (the build backend is in the test extra)
and installed with `--no-index --no-deps`; the venv reaches the dependencies already installed
here through a `.pth` line naming this environment's site-packages (a path line only: the `.pth`
files there, this checkout's editable finder among them, are not run), so `wake` itself can only
come from the wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import urllib.request
from pathlib import Path

import pytest

from tests.acceptance.test_cli_mcp_commands import MCP_TIME, WAIT_S, _served
from wake.model import embedded

pytestmark = pytest.mark.acceptance

REPO = Path(__file__).resolve().parents[2]
SKIPPED = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache")


def _run(argv: list[str], *, env: dict[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    """`argv` without PYTHONPATH, whoever ran the suite with one (bench/suite.py puts its checkout
    there): the installed wheel must be what the venv imports, as on a user's machine."""
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONPATH"}
    r = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT_S * 3, stdin=subprocess.DEVNULL, env=env, **kw)  # type: ignore[call-overload]
    assert isinstance(r, subprocess.CompletedProcess)
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the wheel built from this tree installed; returns its `wake` script."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=SKIPPED)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp / "dist"), str(src)])
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("wake-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    py = venv / "bin" / "python"
    site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
    Path(site, "deps-of-the-test-environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    done = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index", "--no-deps", str(wheel)])
    assert done.returncode == 0, done.stderr[-3000:]
    where = _run([str(py), "-c", "import wake.config; print(wake.config.EMBEDDED_DEFAULT)"], cwd=tmp)
    assert where.stdout.strip().startswith(site), where  # the package data of the installed wheel, not this checkout
    return venv / "bin" / "wake"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "PYTHONPATH"))}
    env.update(WAKE_STATE_DIR=str(tmp_path / "state"), WAKE_ENGINES__IDLE_S="60", WAKE_LOG_FORMAT="json", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    return env


def test_wake_up_from_the_wheel_runs_on_its_embedded_default(installed: Path, tmp_path: Path) -> None:
    env, cwd = _env(tmp_path), tmp_path / "anywhere"
    cwd.mkdir()
    try:
        up = _run([str(installed), "up"], env=env, cwd=cwd)
        assert up.returncode == 0, up.stderr[-3000:]
        assert "Traceback" not in up.stderr
        assert "agent demo" in up.stdout or "demo" in up.stdout, up.stdout
        doctor = _run([str(installed), "doctor"], env=env, cwd=cwd)
        config_line = next(line for line in doctor.stdout.splitlines() if "config" in line)
        assert str(installed.parent.parent) in config_line and "wake/config/default/wake.toml" in config_line, doctor.stdout
    finally:
        _run([str(installed), "engines", "stop"], env=env, cwd=cwd)


def test_a_newcomers_first_steps_with_an_mcp_server(installed: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "agents" / "demo").mkdir(parents=True)
    default = Path(_run([str(installed.parent / "python"), "-c", "import wake.config; print(wake.config.EMBEDDED_DEFAULT)"]).stdout.strip())
    shutil.copy(default.parent / "agents" / "demo" / "persona.md", home / "agents" / "demo" / "persona.md")
    (home / "wake.toml").write_text(default.read_text() + MCP_TIME)
    env = {**_env(tmp_path), "WAKE_CONFIG": str(home / "wake.toml")}
    wake = str(installed)
    try:
        for argv in (["up"], ["registry"], ["up", "--tier", "surface"]):
            r = _run([wake, *argv], env=env, cwd=home)
            assert r.returncode == 0 and "Traceback" not in r.stderr, (argv, r.stderr[-3000:])
            if argv == ["registry"]:
                assert "time__get_current_time" in r.stdout, r.stdout
        ledger = json.loads(_run([wake, "ledger", "--json"], env=env, cwd=home).stdout)
        newest = ledger[0]
        assert newest["tier"] == "surface", newest
        show = _run([wake, "show", newest["wake_id"], "--transcript"], env=env, cwd=home)
        assert show.returncode == 0 and "Traceback" not in show.stderr, show.stderr[-3000:]
        shown = _run([wake, "show", newest["wake_id"]], env=env, cwd=home)
        assert "time__get_current_time" in shown.stdout, shown.stdout  # the MCP tool was bound to the surface wake

        def one_page(line: dict[str, object]) -> None:
            with urllib.request.urlopen(f"{line['url']}/wakes/{newest['wake_id']}", timeout=WAIT_S) as page:  # noqa: S310 (loopback)
                assert page.status == 200 and newest["wake_id"] in page.read().decode()

        served = _served({**env, "PATH": f"{installed.parent}{os.pathsep}{env['PATH']}"}, ["console", "--listen", "127.0.0.1:0"],
                         "console.listening", False, one_page, tmp_path / "console.out", wake=wake)
        assert "Traceback" not in served
        _embedded_surface_wake(wake, env, home)
    finally:
        _run([wake, "engines", "stop"], env=env, cwd=home)


def _embedded_surface_wake(wake: str, env: dict[str, str], home: Path) -> None:
    """With the embedded model built (`.ci/run` caches it; WAKE_REQUIRE_LLAMA=1 there), the
    newcomer's optional line: `wake model fetch` (a no-op on the cache) and a surface wake with a
    model turn and a tool call, from the wheel. Without the build this step is left out, saying so."""
    cache = embedded.default_cache_dir().expanduser().resolve()
    if embedded.missing(cache):
        assert os.environ.get("WAKE_REQUIRE_LLAMA") != "1", f"WAKE_REQUIRE_LLAMA=1 but the embedded model is not in {cache}"
        print(f"(the embedded model is not fetched into {cache}: its surface wake is left out)")
        return
    with_cache = {**env, "WAKE_LLAMA_CACHE": str(cache)}
    fetched = _run([wake, "model", "fetch"], env=with_cache, cwd=home)
    assert fetched.returncode == 0 and "already fetched" in fetched.stdout, fetched.stderr[-3000:]
    demo = subprocess.run([wake, "demo", "wake", "--json"], capture_output=True, text=True, timeout=900, env=with_cache, cwd=home,
                          stdin=subprocess.DEVNULL)
    assert demo.returncode == 0 and "Traceback" not in demo.stderr, demo.stderr[-3000:]
    out = json.loads(demo.stdout)
    assert out["status"] == "completed" and out["thinking"]["turns"] >= 1 and out["thinking"]["tool_calls"] >= 1, out
    transcript = json.loads(_run([wake, "show", out["wake_id"], "--transcript", "--json"], env=with_cache, cwd=home).stdout)
    assert any(m["role"] == "assistant" for m in transcript["messages"]) and transcript["calls"][0]["tool"] == "local_time", transcript
