"""systemd/wake.service: the keys the service needs, checked by parsing, and by systemd-analyze
when it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wake.config import DaemonConfig, load_config_file

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "wake.service"
DOC = ROOT / "docs" / "systemd.md"
_SPAN_UNITS_S = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "ms": 0.001}


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections of key -> every value given (systemd keys may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"key outside a section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def timespan_s(text: str) -> float:
    """systemd time spans as used here: `90`, `90s`, `1min 30s`, `2m`."""
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text):
        total += float(number) * _SPAN_UNITS_S[unit]
    return total


def default_drain_s() -> float:
    """The daemon's default drain time (`daemon.drain_s`)."""
    return float(DaemonConfig().drain_s)


@pytest.fixture(scope="module")
def service() -> dict[str, list[str]]:
    return parse_unit(UNIT.read_text())["Service"]


def one(service: dict[str, list[str]], key: str) -> str:
    values = service.get(key)
    assert values, f"{key}= is missing"
    return values[-1]


def test_notify_watchdog_restart_and_stop_timeout(service: dict[str, list[str]]) -> None:
    assert one(service, "Type") == "notify"
    assert one(service, "NotifyAccess") == "main"
    program, *arguments = one(service, "ExecStart").split()
    assert Path(program).is_absolute() and Path(program).name == "wake" and arguments == ["daemon"]
    assert 0 < timespan_s(one(service, "WatchdogSec")) <= 120
    assert one(service, "Restart") == "on-failure"
    assert timespan_s(one(service, "RestartSec")) > 0
    assert timespan_s(one(service, "TimeoutStopSec")) > default_drain_s()
    # Only wake gets SIGTERM: its embedded engines must outlive the drain.
    assert one(service, "KillMode") == "mixed"
    assert "WAKE_CONFIG=/etc/wake/wake.toml" in service["Environment"]


def test_user_state_and_credentials(service: dict[str, list[str]]) -> None:
    assert one(service, "DynamicUser") == "yes" or one(service, "User")
    assert one(service, "StateDirectory") == "wake"
    example = load_config_file(ROOT / "config" / "wake.example.toml", environ={})
    credentials = {value.split(":", 1)[0] for value in service["LoadCredential"]}
    model_keys = {route.api_key_credential for route in example.models.values() if route.api_key_credential}
    assert model_keys and model_keys <= credentials, "every model key the example config names is loaded as a credential"


def test_hardening(service: dict[str, list[str]]) -> None:
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules",
                "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname", "RestrictNamespaces",
                "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality", "MemoryDenyWriteExecute"):
        assert one(service, key) == "yes", key
    assert one(service, "ProtectSystem") == "strict"
    assert service["CapabilityBoundingSet"] == [""]
    assert set(one(service, "RestrictAddressFamilies").split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert service["SystemCallFilter"][0] == "@system-service"
    assert one(service, "SystemCallArchitectures") == "native"
    assert one(service, "UMask") == "0077"


def _analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    return tool


def _testable_copy(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at this environment's `wake` (verify checks it exists)."""
    wake = Path(sys.executable).parent / "wake"
    if not wake.exists():
        pytest.skip(f"no wake console script next to {sys.executable} (install the package with pip)")
    text = re.sub(r"^ExecStart=\S+", f"ExecStart={wake}", UNIT.read_text(), flags=re.MULTILINE)
    copy = tmp_path / "wake.service"
    copy.write_text(text)
    return copy


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = _analyze()
    done = subprocess.run([tool, "verify", str(_testable_copy(tmp_path))], capture_output=True, text=True, timeout=60)
    complaints = [line for line in done.stderr.splitlines() if "wake.service" in line]
    assert done.returncode == 0 and not complaints, done.stderr


def test_exposure_score_is_the_one_documented(tmp_path: Path) -> None:
    tool = _analyze()
    if "--offline" not in subprocess.run([tool, "security", "--help"], capture_output=True, text=True).stdout:
        pytest.skip("this systemd-analyze has no `security --offline` (systemd < 250)")
    done = subprocess.run([tool, "security", "--offline=yes", str(_testable_copy(tmp_path))], capture_output=True, text=True, timeout=60)
    match = re.search(r"Overall exposure level for wake\.service: (\d+\.\d+)", done.stdout)
    assert match, done.stdout[-500:] + done.stderr
    score = float(match.group(1))
    assert score <= 2.0, f"exposure {score}: the hardening regressed"
    assert f"exposure level for wake.service: {match.group(1)}" in DOC.read_text(), "docs/systemd.md quotes the current exposure score"
