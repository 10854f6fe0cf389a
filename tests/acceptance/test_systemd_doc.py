"""docs/systemd.md works as written (issue 42), as far as a machine without a running systemd
allows: the unit passes `systemd-analyze verify` (systemd itself is never started), the config
the install step copies loads with the persona it names present where the steps put it, every
credential that config names is loaded by the unit, the schema step comes before the service is
enabled, the exit statuses the page states are the ones the commands give, and its `wake status`
sample is what `wake status` renders."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wake import config as wake_config
from wake.cli import render

pytestmark = pytest.mark.acceptance

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "systemd.md").read_text(encoding="utf-8")
UNIT = (REPO / "systemd" / "wake.service").read_text(encoding="utf-8")
EXAMPLE = REPO / "config" / "wake.example.toml"
SRC = "/opt/wake/src/"


def _install_block() -> list[str]:
    section = DOC.split("## Install", 1)[1]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.strip().startswith("#")]


def _installed_files() -> dict[str, Path]:
    """What the steps' `install -m MODE SRC DEST` lines copy: destination -> the file in this repository."""
    out = {}
    for line in _install_block():
        m = re.match(r"sudo install -m \d+ (\S+) (\S+)$", line)
        if m and m.group(1).startswith(SRC):
            out[m.group(2)] = REPO / m.group(1).removeprefix(SRC)
    return out


def test_the_steps_install_the_config_and_the_persona_it_names(tmp_path: Path) -> None:
    files = _installed_files()
    assert files["/etc/wake/wake.toml"] == EXAMPLE
    config = wake_config.load_config_file(EXAMPLE, environ={})  # the config the steps install loads
    for agent in config.agents:
        for persona in config.agents[agent].persona_files:
            assert persona in files, f"no step installs {persona}, which the example's agent {agent} names"
            assert files[persona].is_file() and files[persona].read_text(encoding="utf-8").strip()


def _credentials_named(text: str) -> set[str]:
    return set(re.findall(r'_credential\s*=\s*"([^"]+)"', text))


def test_every_credential_the_example_names_is_loaded_by_the_unit_and_written_by_the_steps() -> None:
    named = _credentials_named(EXAMPLE.read_text(encoding="utf-8"))
    assert named >= {"openrouter_api_key", "neo4j_password"}
    loaded = set(re.findall(r"^LoadCredential=([^:\s]+):", UNIT, re.MULTILINE))
    assert named <= loaded, f"named by the example, not loaded by the unit: {sorted(named - loaded)}"
    written = set(re.findall(r"/etc/wake/credentials/([a-z0-9_]+) >/dev/null", "\n".join(_install_block())))
    assert named <= written, f"named by the example, no step writes: {sorted(named - written)}"


def test_the_schema_is_migrated_before_the_service_starts() -> None:
    """The example sets auto_migrate = false: a step runs `wake migrate` before `systemctl enable --now`."""
    assert wake_config.load_config_file(EXAMPLE, environ={}).postgres.auto_migrate is False
    steps = _install_block()
    migrate = next(i for i, s in enumerate(steps) if s.endswith("/opt/wake/venv/bin/wake migrate"))
    enable = next(i for i, s in enumerate(steps) if "systemctl enable --now wake" in s)
    assert migrate < enable
    assert "-E WAKE_CONFIG=/etc/wake/wake.toml" in steps[migrate]
    for cred in re.findall(r"^LoadCredential=(neo4j_password:\S+)", UNIT, re.MULTILINE):
        assert f"LoadCredential={cred}" in steps[migrate]  # migrate creates Neo4j's constraints: it needs the password


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed (Debian: the systemd package)")
def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """Verified offline (nothing is started). The unit's ExecStart= names /opt/wake/venv, which a test
    machine lacks: the copy names this environment's `wake` instead, nothing else changed."""
    wake = Path(sys.executable).with_name("wake")
    unit = tmp_path / "wake.service"
    unit.write_text(UNIT.replace("/opt/wake/venv/bin/wake", str(wake)))
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "warning"}
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=120, env=env)
    lines = [x for x in (r.stdout + r.stderr).splitlines() if "wake.service" in x]
    assert r.returncode == 0 and not lines, r.stdout + r.stderr


def test_the_exit_statuses_the_page_states(wake_cli) -> None:  # type: ignore[no-untyped-def]
    """`wake trigger` for an unknown agent: 65 (refused input, as the page says); with no daemon: 69."""
    assert "(exit 65 if unknown)" in DOC and "exits **69**" in DOC
    unknown = wake_cli("trigger", "--agent", "nobody")
    assert unknown.returncode == 65, unknown.stderr
    none_alive = wake_cli("trigger")
    assert none_alive.returncode == 69, none_alive.stderr


def test_the_status_sample_is_what_wake_status_renders() -> None:
    sample = DOC.split("\nreplicas (1 live)\n", 1)[1].split("```", 1)[0]
    at = dt.datetime(2026, 11, 29, 12, 11, 9, tzinfo=dt.UTC)
    iso = lambda **kw: (at + dt.timedelta(**kw)).isoformat()  # noqa: E731
    snapshot = {
        "at": at.isoformat(), "redis": "unix:///var/lib/wake/redis/redis.sock", "daemon_alive": True, "pending_requests": 0,
        "replicas": [{"replica_id": "db1:4121:9f2c1a0e", "host": "db1", "pid": 4121, "version": "0.1.0", "started_at": iso(hours=-2),
                      "heartbeat_age_s": 3, "owned": 1}],
        "running": [{"agent": "demo", "tier": "surface", "trigger": "schedule", "wake_id": "0b6f6f8e-3d0e-4c55-9d8e-6a8a3cbd6f11",
                     "started_at": iso(seconds=-17), "fence": 42, "replica_id": "db1:4121:9f2c1a0e"}],
        "leases": [{"agent": "demo", "owner": "db1:4121:9f2c1a0e", "held": True, "holder": "db1:4121:5be0c2d1a9f3e6b7", "ttl_s": 42.9,
                    "fence": 42}],
        "next_fires": [{"agent": "demo", "tier": t, "at": iso(**d), "next_active": iso(**d)}
                       for t, d in (("whisper", {"minutes": 7}), ("surface", {"minutes": 48}), ("full", {"hours": 15}))],
        "pauses": [], "oneshots": [], "open_findings": {"demo": {"HALT": 0, "WARN": 1, "LOG": 1}},
    }
    rendered = "\n".join(render.status_lines(snapshot)[1:])
    assert rendered.strip("\n") == sample.strip("\n")
