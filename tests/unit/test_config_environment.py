"""The loader is the only code that reads the environment the config depends on (WAKE_*, PG*,
NEO4J_AUTH, STATE_DIRECTORY, XDG_*), and it reads it once, at load."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from wake import config as wake_config

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("wake", "surfaces", "ledgers", "codecheck", "memory")
LOADER = REPO / "wake" / "config" / "loader.py"
CONFIG_VARIABLE = re.compile(r"^(WAKE_\w*|PG\w*|NEO4J_AUTH|STATE_DIRECTORY|XDG_\w*|DATABASE_URL|REDIS_URL|NEO4J_URI)$")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _env_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, variable) of each read of a config variable: environ.get/[...]/in, getenv, click's envvar=."""
    found: list[tuple[int, str]] = []

    def named(node: ast.AST | None, line: int) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and CONFIG_VARIABLE.match(node.value):
            found.append((line, node.value))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = _dotted(node.func)
            if func.endswith(("environ.get", "environ.pop", "environ.setdefault", "getenv")) and node.args:
                named(node.args[0], node.lineno)
            for keyword in node.keywords:
                if keyword.arg in ("envvar", "auto_envvar_prefix"):
                    named(keyword.value, node.lineno)
        elif isinstance(node, ast.Subscript) and _dotted(node.value).endswith("environ"):
            named(node.slice, node.lineno)
        elif isinstance(node, ast.Compare) and any(_dotted(c).endswith("environ") for c in node.comparators):
            named(node.left, node.lineno)
    return found


def test_only_the_loader_reads_config_variables() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if path == LOADER:
                continue
            for line, variable in _env_reads(ast.parse(path.read_text(encoding="utf-8"))):
                offenders.append(f"{path.relative_to(REPO)}:{line} reads {variable}")
    assert offenders == []


def test_the_scan_sees_each_kind_of_read() -> None:
    reads = _env_reads(ast.parse(
        'import os\nos.environ.get("WAKE_X")\nos.environ["PGHOST"]\n"XDG_STATE_HOME" in os.environ\nos.getenv("NEO4J_AUTH")\n'
        'click.option("--c", envvar="WAKE_CONFIG")\nos.environ.get("HOME")\n'
    ))
    assert [v for _, v in reads] == ["WAKE_X", "PGHOST", "XDG_STATE_HOME", "NEO4J_AUTH", "WAKE_CONFIG"]
    assert _env_reads(ast.parse(LOADER.read_text(encoding="utf-8")))  # the loader does read them


def test_the_environment_is_read_at_load_not_later(tmp_path: Path, monkeypatch: object) -> None:
    path = tmp_path / "wake.toml"
    path.write_text('[agents.a.tiers.whisper]\nbinds = ["wake.whisper"]\n')
    config = wake_config.load_config_file(path, environ={
        "WAKE_STATE_DIR": str(tmp_path / "s"), "NEO4J_AUTH": "neo/pw", "PGHOST": "db", "PGPORT": "6543", "PGDATABASE": "w",
    })
    assert config.state_dir_path() == tmp_path / "s"
    assert config.memory_path("a") == tmp_path / "s" / "memory" / "a"
    assert config.environment.libpq_address == "db:6543/w"
    auth = config.environment.neo4j_auth
    assert isinstance(auth, tuple) and auth[0] == "neo" and auth[1].reveal() == "pw" and "pw" not in repr(config.environment)
    # a config built from the same file under an empty environment sees none of it
    bare = wake_config.load_config_file(path, environ={"XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert bare.state_dir_path() == tmp_path / "xdg" / "wake" and bare.environment.neo4j_auth is None


def test_no_default_is_written_twice() -> None:
    from surfaces.context import RecallSettings, ToolSettings

    assert wake_config.RecallConfig().settings() == RecallSettings()
    tools, conf = ToolSettings(), wake_config.Config.model_validate({"agents": {"a": {"tiers": {"whisper": {"binds": ["wake.whisper"]}}}}})
    assert (conf.retractions.falsifier_maturity_days, conf.neo4j.neighbors_max, conf.probes.max_file_bytes) == (
        tools.falsifier_maturity_days, tools.graph_neighbors_max, tools.probe_max_file_bytes,
    )
