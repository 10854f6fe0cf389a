"""What an MCP tool adds to a wake, next to a built-in tool, in the same run. Prints figures; it
is not a timed test.

    python bench/mcp_tools.py [--calls 200] [--colds 10]

1. A built-in tool (`local_time`) called in process: the baseline.
2. An MCP tool (`mcp-server-time`'s `get_current_time`) over a session kept open, as the daemon
   keeps one per server: the cost of one call.
3. The same tool from a cold server, as a `wake up` pays it: start the server, list its tools,
   call once, close it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from surfaces import builtin, mcp  # noqa: E402

SPEC = mcp.ServerSpec(name="time", command="mcp-server-time", args=("--local-timezone", "UTC"), surfaces=(("*", ("wake",)),))


class _Ctx:
    """What `local_time` reads of a wake."""

    now = dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC)
    timezone = "Europe/Stockholm"


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):8.3f} ms   p99 {p99:8.3f} ms   (n={len(ordered)})"


async def _timed(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


async def main(calls: int, colds: int) -> None:
    ctx = _Ctx()
    builtin_ms = await _timed(lambda: builtin.local_time.handler(ctx), calls)
    hub = mcp.Hub([SPEC], keep_alive=False)
    await hub.start()
    try:
        server = hub.servers["time"]
        assert server.state == "ready", server.reason
        await server.call("get_current_time", {"timezone": "UTC"})  # warm
        reused_ms = await _timed(lambda: server.call("get_current_time", {"timezone": "UTC"}), calls)
    finally:
        await hub.close()

    async def cold() -> None:
        h = mcp.Hub([SPEC], keep_alive=False)
        await h.start()
        try:
            await h.servers["time"].call("get_current_time", {"timezone": "UTC"})
        finally:
            await h.close()

    cold_ms = await _timed(cold, colds)
    print(f"built-in local_time, in process        {_ms(builtin_ms)}")
    print(f"MCP time__get_current_time, reused     {_ms(reused_ms)}")
    print(f"MCP cold: start + list + call + close  {_ms(cold_ms)}")
    print(f"a reused MCP call costs {statistics.median(reused_ms) / max(statistics.median(builtin_ms), 1e-6):.0f}x a built-in; "
          f"a cold server adds {statistics.median(cold_ms) - statistics.median(reused_ms):.0f} ms to the wake that opens it")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--colds", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.colds))
