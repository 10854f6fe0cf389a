"""The test session's environment: what the code under test would read from the user's is removed.

`wake` reads its configuration and its stores from the environment (`WAKE_STATE_DIR`,
`WAKE_CONFIG`, `WAKE_<SECTION>__<KEY>`, `DATABASE_URL`, `PG*`, `REDIS_URL`, `NEO4J_*`, `OTEL_*`
(traces), the XDG base directories, systemd's `STATE_DIRECTORY` and `CREDENTIALS_DIRECTORY`, `NOTIFY_SOCKET`). A user
who exports any of them (the README documents `WAKE_STATE_DIR`) must not see the suite read their
state or write into it, so `tests/conftest.py` calls `scrub` before any test module is collected.

Kept: the suite's own switches, which the loader never reads (`WAKE_TEST_*`, `WAKE_REQUIRE_*`,
`WAKE_CI_*`, `WAKE_EXT_*` and `WAKE_*_CACHE`, none with the `__` of a config override). The XDG
state and config homes are pointed into the session's temporary directory, so a default state
directory (`$XDG_STATE_HOME/wake`) can never be the user's.

The scripts of the environment running the suite (`sysconfig`'s `scripts` path: a venv's `bin`)
are put first on PATH, as activating the venv would: the tests start `mcp-server-time`,
`mcp-server-git` and `wake` by name, and `venv/bin/python -m pytest` without activating it must
find the environment's own, not fail on them or run another installation's.
"""

from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import MutableMapping
from pathlib import Path

# The suite's own variables: read by tests/conftest.py and tests/support, never by `wake`.
KEPT = re.compile(r"^WAKE_(TEST|REQUIRE|CI|EXT)_[A-Z0-9_]+$|^WAKE_[A-Z0-9]+_CACHE$")
# What the loader, the stores and the daemon read.
READ_BY_WAKE = re.compile(
    r"^(WAKE_|PG|NEO4J_|XDG_|OTEL_)|^(REDIS_URL|DATABASE_URL|STATE_DIRECTORY|CREDENTIALS_DIRECTORY|NOTIFY_SOCKET|WATCHDOG_USEC|WATCHDOG_PID)$"
)


def kept(name: str) -> bool:
    return bool(KEPT.match(name)) and "__" not in name


def scrub(environ: MutableMapping[str, str], home: Path) -> list[str]:
    """Remove every variable `wake` reads (but the suite's own); returns the names removed."""
    removed = sorted(name for name in environ if READ_BY_WAKE.match(name) and not kept(name))
    for name in removed:
        del environ[name]
    for name, sub in (("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config")):
        path = home / sub
        path.mkdir(parents=True, exist_ok=True)
        environ[name] = str(path)
    return removed


def scrub_process(home: Path) -> list[str]:
    scripts_first(os.environ)
    return scrub(os.environ, home)


def scripts_first(environ: MutableMapping[str, str], scripts: str | None = None) -> str:
    """Put the running environment's scripts directory first on PATH (once); returns it."""
    scripts = scripts or sysconfig.get_path("scripts")
    parts = [p for p in environ.get("PATH", "").split(os.pathsep) if p and p != scripts]
    environ["PATH"] = os.pathsep.join([scripts, *parts])
    return scripts
