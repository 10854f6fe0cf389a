"""One MCP server's session under faults, with our own server on the SDK's server API
(tests/support/mcp_server.py) over stdio: a tool error, a crash mid-call (restarted with
backoff), a hung call (cancelled on the server), 5 MB (clipped), tools/list_changed (re-listed).
A malformed JSON-RPC frame, which the SDK's server cannot be made to send, comes from a scripted
process."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

import psutil
import pytest

from surfaces import mcp
from surfaces.errors import McpToolError

REPO = Path(__file__).resolve().parents[2]


def _spec(state: Path, **kw: object) -> mcp.ServerSpec:
    base: dict[str, object] = dict(
        name="t", command=sys.executable, args=("-m", "tests.support.mcp_server", "--state", str(state)), cwd=REPO,
        surfaces=(("*", ("wake",)),), call_timeout_s=60.0, ping_interval_s=600.0, restart_min_s=0.2, stderr=state / "stderr",
    )
    base.update(kw)
    return mcp.ServerSpec(**base)  # type: ignore[arg-type]


def _running_children(needle: str) -> list[psutil.Process]:
    """This process's live children whose command line holds `needle`. A zombie (a child an
    earlier test of the session started and nobody has reaped yet) is not running: skipped."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and needle in " ".join(p.cmdline()):
                found.append(p)
        except (psutil.ZombieProcess, psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


async def _file_appears(server: mcp.Server, path: Path, bound_s: float) -> bool:
    """Whether `path` appears within `bound_s` while the server stays ready. The server's own
    state does not change when its handler writes a file (`until` alone would sit out the whole
    bound), so each look waits at most 50 ms for a state change."""
    loop = asyncio.get_running_loop()
    end = loop.time() + bound_s
    while not path.exists():
        if loop.time() > end or await server.until(lambda s: s.state != "ready", 0.05):
            return path.exists()
    return True


def _children() -> list[psutil.Process]:
    return _running_children("mcp_server")


async def test_tool_error_crash_hang_big_and_list_changed(tmp_path: Path) -> None:
    hub = mcp.Hub([_spec(tmp_path)], keep_alive=True)
    await hub.start()
    try:
        server = hub.servers["t"]
        assert server.state == "ready"
        assert {t.name: t.mutates for t in hub.tools()} == {
            "t__echo": False, "t__hang": False, "t__big": False, "t__fails": False, "t__crash": True, "t__grow": True,
        }
        assert await server.call("echo", {"text": "hi"}) == "echo: hi"
        with pytest.raises(McpToolError, match="fails"):  # isError: a tool error, the session goes on
            await server.call("fails", {})
        big = await server.call("big", {})
        assert len(big) == server.spec.result_max_chars  # 5 MB answered, clipped before the loop's own cap
        # the hung call alone runs under a short timeout: it never answers, so any bound proves
        # the cut, and the other calls keep the long one a loaded machine needs
        patient = server.spec
        server.spec = dataclasses.replace(patient, call_timeout_s=2.0)
        with pytest.raises(TimeoutError, match="did not answer hang in 2.0s"):
            await server.call("hang", {})
        server.spec = patient
        assert await _file_appears(server, tmp_path / "cancelled", 30)  # notifications/cancelled reached the server's handler
        assert server.state == "ready"
        assert await server.call("grow", {}) == "grew"
        assert await server.until(lambda s: "t__added" in s.tools, 30)  # re-listed on tools/list_changed
        assert server.relists >= 1
        first = _children()
        assert len(first) == 1
        with pytest.raises(mcp.McpUnavailable):
            await server.call("crash", {})
        assert await server.until(lambda s: s.starts >= 2 and s.state == "ready", 60)  # started again
        assert "t__echo" in server.tools and "t__added" not in server.tools
        assert not first[0].is_running() or first[0].status() == psutil.STATUS_ZOMBIE
    finally:
        await hub.close()
    assert not _children()  # no server outlives the hub
    assert hub.servers["t"].state == "stopped"


async def test_a_server_that_exits_at_once_is_failed_and_not_restarted_without_keep_alive(tmp_path: Path) -> None:
    hub = mcp.Hub([_spec(tmp_path, args=("-c", "raise SystemExit(2)"))], keep_alive=False)
    await hub.start()
    server = hub.servers["t"]
    assert server.state == "failed" and server.reason
    assert hub.tools() == [] and server.starts == 1
    await hub.close()


async def test_a_malformed_frame_fails_the_start_within_its_timeout(tmp_path: Path) -> None:
    # scripted: the SDK's server never writes a line that is not JSON-RPC
    script = "import sys\nsys.stdin.readline()\nprint('this is not json-rpc', flush=True)\nsys.stdin.read()\n"
    hub = mcp.Hub([_spec(tmp_path, args=("-c", script), start_timeout_s=3.0)], keep_alive=False)
    await hub.start()
    server = hub.servers["t"]
    assert server.state == "failed"
    assert server.reason is not None
    await hub.close()
    assert not _running_children("not json-rpc")
