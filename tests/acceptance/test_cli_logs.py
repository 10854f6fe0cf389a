"""`wake logs` over real logs: the JSON lines of `wake up` and of two `wake daemon` replicas, read
from a file, from a pipe, and followed while they are written."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from click.testing import CliRunner

from tests.support import cli_fork, pooler
from tests.support.daemon_proc import Replica
from wake.observe import logread

REPO = Path(__file__).resolve().parents[2]
# The command as a process (the module runs the same click command `wake logs` is).
LOGS = [sys.executable, "-m", "wake", "logs"]
WAIT_S = 60.0


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "NOTIFY_SOCKET", "WATCHDOG_"))
    }
    # WAKE_ENGINES__IDLE_S=0: the last command out stops the embedded engines; nothing outlives the test.
    return {**env, "PYTHONPATH": str(REPO), "WAKE_LOG_FORMAT": "json", "WAKE_ENGINES__IDLE_S": "0", **extra}


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _shown(lines: list[str]) -> list[str]:
    """The event name of each rendered line."""
    return [line.split("] ", 1)[1].split()[0] for line in lines if "] " in line]


def logs(*args: str, input_text: str = "") -> tuple[int, list[str], str]:
    result = CliRunner().invoke(logread.logs_command, [*args, "--color", "never"], input=input_text.encode())
    return result.exit_code, result.stdout.splitlines(), result.stderr


@pytest.fixture(scope="module")
def two_wakes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two `wake up` runs (whisper, then surface) on one embedded state: their stderr and outcomes."""
    env = _clean_env(WAKE_STATE_DIR=str(tmp_path_factory.mktemp("logs") / "state"))
    runs = []
    for tier in ("whisper", "surface"):
        done = cli_fork.run(
            [sys.executable, "-m", "wake", "up", "--tier", tier, "--json"], check=False, capture_output=True, text=True, timeout=180, env=env,
            stdin=subprocess.DEVNULL, cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        runs.append({"outcome": json.loads(done.stdout), "stderr": done.stderr})
    return {"runs": runs, "log": "".join(r["stderr"] for r in runs)}


def test_every_line_of_a_real_log_is_rendered(two_wakes: dict[str, Any]) -> None:
    text = two_wakes["log"]
    code, shown, _ = logs(input_text=text)
    assert code == 0
    events = _events(text)
    assert len(shown) == len(text.splitlines()) == len(events)
    assert _shown(shown) == [e["event"] for e in events]
    assert all(line.startswith(e["timestamp"]) for line, e in zip(shown, events, strict=True))


def test_the_story_of_one_wake_of_wake_up(two_wakes: dict[str, Any]) -> None:
    first, second = (r["outcome"] for r in two_wakes["runs"])
    code, shown, _ = logs("--wake", first["wake_id"][:8], input_text=two_wakes["log"])
    assert code == 0
    names = _shown(shown)
    assert names[:2] == ["lease.acquired", "wake.started"] and names[-1] == "wake.settled"
    assert names.count("arrival.block") == len(first["blocks"])  # each block's line, though it names no wake
    assert {"bind.done", "manifest.recorded"} <= set(names) and "schema.migrated" not in names
    assert not any(second["wake_id"] in line for line in shown)
    assert f"status={first['status']}" in shown[-1]


def test_tier_and_event_filters_on_a_real_log(two_wakes: dict[str, Any]) -> None:
    first, second = (r["outcome"] for r in two_wakes["runs"])
    _, surface, _ = logs("--tier", "surface", input_text=two_wakes["log"])
    assert _shown(surface).count("arrival.block") == len(second["blocks"])
    assert not any(first["wake_id"] in line for line in surface) and any(second["wake_id"] in line for line in surface)
    _, blocks, _ = logs("--event", "arrival.*", input_text=two_wakes["log"])
    assert len(blocks) == len(first["blocks"]) + len(second["blocks"])
    assert logs("--level", "warning", input_text=two_wakes["log"])[1] == []  # a clean run warns of nothing


def test_a_pipe_is_read_line_by_line_until_it_closes(two_wakes: dict[str, Any]) -> None:
    lines = two_wakes["log"].splitlines()
    proc = subprocess.Popen(
        [*LOGS, "--follow", "--color", "never"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_clean_env(), cwd=REPO
    )
    assert proc.stdin is not None and proc.stdout is not None
    out = _reader(proc.stdout)
    try:
        for line in lines[:3]:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            # each line is shown while the pipe is still open
            assert _next(out).startswith(json.loads(line)["timestamp"])
        proc.stdin.close()
        assert proc.wait(WAIT_S) == 0
        assert _rest(out) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_follow_a_file_through_appends_truncation_and_rotation(two_wakes: dict[str, Any], tmp_path: Path) -> None:
    lines = two_wakes["log"].splitlines()
    path = tmp_path / "wake.jsonl"
    path.write_text("\n".join(lines[:2]) + "\n")
    proc = subprocess.Popen(
        [*LOGS, "--follow", "--color", "never", str(path)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=_clean_env(), cwd=REPO
    )
    assert proc.stdout is not None
    out = _reader(proc.stdout)

    def timestamp(i: int) -> str:
        return str(json.loads(lines[i])["timestamp"])

    try:
        assert _next(out).startswith(timestamp(0)) and _next(out).startswith(timestamp(1))
        with path.open("a") as f:  # appended, the last line in two writes
            f.write(lines[2] + "\n" + lines[3][:20])
            f.flush()
            assert _next(out).startswith(timestamp(2))
            f.write(lines[3][20:] + "\n")
        assert _next(out).startswith(timestamp(3))
        path.write_text(lines[4] + "\n")  # truncated and written again
        assert _next(out).startswith(timestamp(4))
        path.rename(tmp_path / "wake.jsonl.1")  # rotated: a new file by the same name
        path.write_text(lines[5] + "\n")
        assert _next(out).startswith(timestamp(5))
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(WAIT_S)
        rest = _rest(out)
        proc.stdout.close()
    assert proc.returncode == logread.EXIT_INTERRUPTED
    assert rest == []


def _reader(stream: Any) -> queue.Queue[str | None]:
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _next(lines: queue.Queue[str | None]) -> str:
    line = lines.get(timeout=WAIT_S)
    assert line is not None, "the output ended"
    return line


def _rest(lines: queue.Queue[str | None]) -> list[str]:
    rest = []
    while (line := lines.get(timeout=WAIT_S)) is not None:
        rest.append(line)
    return rest


# -- a wake's story across two daemon replicas -----------------------------------------------------


@pytest.fixture
def replicas(tmp_path: Path, pg_dsn: str, redis_url: str) -> Iterator[Callable[[], Replica]]:
    started: list[Replica] = []
    config = tmp_path / "wake.toml"
    config.write_text(
        f'[postgres]\ndsn = "{pg_dsn}"\n{pooler.key()}[redis]\nurl = "{redis_url}"\n[daemon]\nheartbeat_s = 1\n'
        # both replicas schedule the agent and race for each slot: a lost race is what this tells
        # (under the default ownership a replica loses a slot only around a handover)
        'ownership = "every_replica"\n'
        '[agents.demo]\n[agents.demo.tiers.whisper]\nevery = "1s"\nbinds = ["wake.whisper"]\n'
    )
    env = _clean_env(WAKE_STATE_DIR=str(tmp_path / "state"))

    def launch() -> Replica:
        replica = Replica(config, tmp_path / f"replica-{len(started)}.log", env)
        started.append(replica)
        return replica

    yield launch
    for replica in started:
        if replica.proc.poll() is None:
            replica.proc.send_signal(signal.SIGTERM)
            try:
                replica.proc.wait(30)
            except subprocess.TimeoutExpired:
                replica.proc.kill()
                replica.proc.wait(10)
        replica.out.close()


def test_the_story_of_a_daemon_wake_names_the_replica_that_lost_its_slot(
    replicas: Callable[[], Replica], pg_dsn: str, tmp_path: Path,
) -> None:
    a, b = replicas(), replicas()
    deadline = time.monotonic() + 120
    wake_id = None
    while wake_id is None:
        assert time.monotonic() < deadline, "no slot was both run by one replica and lost by the other"
        assert a.proc.poll() is None and b.proc.poll() is None
        for runner, loser in ((a, b), (b, a)):
            settled = {e["wake_id"] for e in runner.events("wake.settled")}
            lost = [e["wake_id"] for e in loser.events("wake.skipped") if e.get("reason") == "slot_taken"]
            wake_id = next((w for w in lost if w in settled), wake_id)
        time.sleep(0.2)
    for replica in (a, b):
        replica.proc.send_signal(signal.SIGTERM)
        assert replica.proc.wait(60) == 0
    # journald would interleave the replicas' lines by time; so does this
    merged = sorted(
        (line for r in (a, b) for line in r.log.read_text().splitlines()),
        key=lambda line: _events(line)[0]["timestamp"] if line.startswith("{") else "",
    )
    path = tmp_path / "merged.jsonl"
    path.write_text("\n".join(merged) + "\n")
    code, shown, _ = logs("--wake", wake_id[:8], str(path))
    assert code == 0
    names = _shown(shown)
    # the loser's skip comes whenever its claim failed: before the winner's lease, or after
    assert "wake.skipped" in names and "reason=slot_taken" in shown[names.index("wake.skipped")]
    lease_line = shown[names.index("lease.acquired")]
    assert [n for n in names if n != "wake.skipped"][:2] == ["lease.acquired", "wake.started"] and names[-1] in ("wake.settled", "wake.skipped")
    naming = [line for line in merged if line.startswith("{") and json.loads(line).get("wake_id") == wake_id]
    assert sum(wake_id in line for line in shown) == len(naming)  # every line that names it, and no other wake's
    fence = asyncio.run(_fence_of(pg_dsn, wake_id))
    assert f"fence={fence}" in lease_line  # the lease shown is the one the wake's row was written under


async def _fence_of(dsn: str, wake_id: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT fence FROM wake_introspection_ledger WHERE wake_id = $1::uuid", wake_id))
    finally:
        await conn.close()
