"""The loader: the one place that reads the environment, once per load.

Where the file comes from, first match wins:

1. `--config PATH` on the command line;
2. `$WAKE_CONFIG`;
3. `./wake.toml`;
4. `$XDG_CONFIG_HOME/wake/wake.toml` (default `~/.config/wake/wake.toml`);
5. `/etc/wake/wake.toml`;
6. the embedded default, `wake/config/default/wake.toml`: package data, so a wheel install has it too.

Overrides, applied over the file in this order (later wins):

- `DATABASE_URL` sets `postgres.dsn`; `PGHOST` (with the other libpq `PG*` variables, which
  asyncpg reads itself) selects an external PostgreSQL when no DSN is set;
- `REDIS_URL` sets `redis.url`; `NEO4J_URI` sets `neo4j.uri`; `NEO4J_AUTH` (`user/password`)
  sets the Neo4j credentials;
- `WAKE_STATE_DIR`, `WAKE_LOG_FORMAT`, `WAKE_LOG_LEVEL`;
- `WAKE_<SECTION>__<KEY>[__<KEY>...]` sets any key, for example
  `WAKE_POSTGRES__COMMAND_TIMEOUT_S=5` or `WAKE_AGENTS__DEMO__TIMEZONE=UTC`. The value is read
  as a TOML value when it parses as one (`5`, `true`, `["a"]`), else as a string.

The rest of what a config depends on (`WAKE_STATE_DIR`, `$STATE_DIRECTORY`, `$XDG_STATE_HOME`,
`NEO4J_AUTH`'s password, where `PG*` points) is read into the config's `Environment` at the same
time: nothing else in wake reads those variables (a test keeps it so).

Every malformed input raises `ConfigError` naming the file (or variable), the key path and what
was expected; the CLI turns it into one line on stderr and exit status 78.
"""

from __future__ import annotations

import os
import tomllib
import typing
from pathlib import Path
from typing import Any

import pydantic

from wake.config.environment import Environment
from wake.config.messages import config_error
from wake.config.root import Config
from wake.errors import ConfigError
from wake.secrets import Secret

ENV_PREFIX = "WAKE_"
EMBEDDED_DEFAULT = Path(__file__).resolve().parent / "default" / "wake.toml"  # with its persona beside it (package data)


def read_environment(environ: typing.Mapping[str, str] | None = None) -> Environment:
    """The variables a config depends on beyond its overrides (`os.environ` unless given)."""
    environ = os.environ if environ is None else environ
    auth = environ.get("NEO4J_AUTH")
    neo4j_auth: typing.Literal["none"] | tuple[str, Secret] | None = None
    if auth:
        user, _, password = auth.partition("/")
        neo4j_auth = "none" if auth.lower() == "none" else (user, Secret(password, "environment NEO4J_AUTH"))
    return Environment(
        wake_state_dir=environ.get("WAKE_STATE_DIR") or None,
        state_directory=environ.get("STATE_DIRECTORY") or None,
        xdg_state_home=environ.get("XDG_STATE_HOME") or None,
        neo4j_auth=neo4j_auth,
        libpq_address=f"{environ.get('PGHOST', 'localhost')}:{environ.get('PGPORT', '5432')}/{environ.get('PGDATABASE', '')}",
    )


def resolve_state_dir(configured: str | None, *, environ: typing.Mapping[str, str] | None = None) -> Path:
    """`WAKE_STATE_DIR`, else `state_dir`, else systemd's `$STATE_DIRECTORY`, else XDG state."""
    return read_environment(environ).state_dir(configured)


def log_settings(environ: typing.Mapping[str, str] | None = None) -> tuple[str, str]:
    """(format, level) for the logs of a command before its config is loaded: `WAKE_LOG_FORMAT`, `WAKE_LOG_LEVEL`."""
    environ = os.environ if environ is None else environ
    return environ.get("WAKE_LOG_FORMAT", "auto"), environ.get("WAKE_LOG_LEVEL", "info").lower()


def llama_cache_dir(environ: typing.Mapping[str, str] | None = None) -> Path:
    """The embedded model's cache (`wake model fetch`, `kind = "embedded"` routes):
    `$WAKE_LLAMA_CACHE`, else `~/.cache/wake/llama`; read here, as every variable wake reads."""
    environ = os.environ if environ is None else environ
    env = environ.get("WAKE_LLAMA_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "wake" / "llama"


def candidate_paths(explicit: str | os.PathLike[str] | None) -> list[tuple[Path, str]]:
    """Where a config file is looked for, in order, with the reason for each place."""
    if explicit:
        return [(Path(explicit), "--config")]
    if os.environ.get("WAKE_CONFIG"):
        return [(Path(os.environ["WAKE_CONFIG"]), "WAKE_CONFIG")]
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [
        (Path("wake.toml"), "current directory"),
        (xdg / "wake" / "wake.toml", "XDG config"),
        (Path("/etc/wake/wake.toml"), "system"),
        (EMBEDDED_DEFAULT, "embedded default"),
    ]


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    candidates = candidate_paths(explicit)
    for path, why in candidates:
        if path.is_file():
            return path.resolve()
        if why in ("--config", "WAKE_CONFIG"):
            raise ConfigError(str(path), "(file)", f"expected a readable TOML file (named by {why}); it does not exist")
    tried = ", ".join(str(p) for p, _ in candidates)
    raise ConfigError("(no file)", "(file)", f"expected a config file in one of: {tried}")


def load_config(explicit: str | os.PathLike[str] | None = None, *, environ: typing.Mapping[str, str] | None = None) -> Config:
    """Find, parse, override and validate the configuration."""
    path = find_config(explicit)
    return load_config_file(path, environ=environ)


def load_config_file(path: Path, *, environ: typing.Mapping[str, str] | None = None) -> Config:
    """Parse, override and validate one file (`os.environ` unless `environ` is given)."""
    environ = os.environ if environ is None else environ
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "(file)", f"expected valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), "(file)", f"expected a readable UTF-8 file: {exc}") from exc
    origins: dict[tuple[str, ...], str] = {}
    _apply_overrides(raw, environ, origins)
    try:
        config = Config.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise config_error(path, exc, origins) from None
    config._path = path.resolve()
    config._environment = read_environment(environ)
    return config


def _set(raw: dict[str, Any], keys: tuple[str, ...], value: Any, origin: str, origins: dict[tuple[str, ...], str]) -> None:
    node = raw
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(origin, ".".join(keys), f"expected {key!r} to be a table in the file")
        node = child
    node[keys[-1]] = value
    origins[keys] = origin


def _toml_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _apply_overrides(raw: dict[str, Any], environ: typing.Mapping[str, str], origins: dict[tuple[str, ...], str]) -> None:
    if environ.get("DATABASE_URL"):
        _set(raw, ("postgres", "dsn"), environ["DATABASE_URL"], "DATABASE_URL", origins)
    elif environ.get("PGHOST") and not raw.get("postgres", {}).get("dsn"):
        # asyncpg reads PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE itself from an empty DSN.
        _set(raw, ("postgres", "dsn"), "postgresql://", "PGHOST", origins)
    named: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
        ("REDIS_URL", ("redis", "url"), environ.get("REDIS_URL")),
        ("NEO4J_URI", ("neo4j", "uri"), environ.get("NEO4J_URI")),
        ("NEO4J_AUTH", ("neo4j", "user"), environ.get("NEO4J_AUTH", "").partition("/")[0]),  # the password goes to the Environment, a Secret
        ("WAKE_LOG_FORMAT", ("log", "format"), environ.get("WAKE_LOG_FORMAT")),
        ("WAKE_LOG_LEVEL", ("log", "level"), environ.get("WAKE_LOG_LEVEL", "").lower()),
    )
    for variable, keys, value in named:
        if environ.get(variable):
            _set(raw, keys, value, variable, origins)
    for name in sorted(environ):
        if name.startswith(ENV_PREFIX) and "__" in name:
            path = tuple(k.lower() for k in name[len(ENV_PREFIX) :].split("__"))
            if not all(path):
                raise ConfigError(name, name, "expected WAKE_<SECTION>__<KEY> with non-empty parts")
            _set(raw, path, _toml_value(environ[name]), name, origins)
