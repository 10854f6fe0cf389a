"""Context pressure over the turns of one long full wake, under each policy. Prints figures; not a test.

    python bench/pressure.py [--turns 40] [--window 9000]

The scripted model server on loopback answers every turn with one call of a tool whose result
is 1,200 characters (so the window fills), and counts prompts like llama.cpp (`tokenizer_url`).
Three wakes, the same script: `sovereign` where the agent ignores every reminder (the baseline:
nothing is forced, the wake ends at the window), `sovereign+compact` where the agent answers each
reminder with `context_compact summarize`, and `harness` (reminders at 0.80 and 0.88, automatic
sliding-window compaction at 0.95). Per turn: the pressure recorded before the call (wake_turns),
and the pressure events (context_events) that turn.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledgers import context_events  # noqa: E402
from tests.support import wakes  # noqa: E402
from tests.support.openai_server import Response, ScriptedServer, completion  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake import logs  # noqa: E402
from wake.run import session  # noqa: E402

MARKS = {"narrowed": "n", "reminded": "R", "choice": "C", "compacted": "K", "auto_compacted": "A", "declined": "D", "deferred": "d"}


def _answer(compacting: bool) -> Any:
    counter = itertools.count()

    def answer(body: dict[str, Any]) -> Response:
        last = str(body["messages"][-1].get("content") or "")
        if body["messages"][0]["content"].startswith("Summarize the following"):
            return completion("Read many bulk results; nothing needs acting on.")
        if body.get("tool_choice") == "none":
            return completion("Daybook: read bulk results.")
        if compacting and last.startswith("[wake: c"):
            return completion(tool_calls=[("context_compact", {"strategy": "summarize", "keep_last": 4, "reason": "reminded"})])
        return completion(tool_calls=[("bulk", {"n": next(counter)})])

    return answer


def _toml(state_dir: Path, url: str, root: str, window: int, turns: int, policy: str) -> str:
    return f"""state_dir = "{state_dir}"
[tools]
modules = ["tests.support.pressure_tools"]
[models.scripted]
base_url = "{url}"
tokenizer_url = "{root}"
model = "scripted-1"
context_window = {window}
max_retries = 0
[think]
tool_result_max_chars = 40000
max_repeat_calls = 500
[agents.demo]
timezone = "UTC"
[agents.demo.context]
policy = "{policy}"
[agents.demo.tiers.full]
binds = ["wake"]
model = "scripted"
sources = ["clock"]
[agents.demo.tiers.full.budget]
max_turns = {turns}
max_tool_calls = {turns * 2}
max_output_tokens = 100000
max_cost_usd = 100
"""


async def _run(
    state_dir: Path, window: int, turns: int, policy: str, compacting: bool,
) -> tuple[list[context_events.Turn], list[context_events.Event], str]:
    with ScriptedServer(default=_answer(compacting)) as server:
        path = state_dir / f"{policy}-{compacting}.toml"
        path.write_text(_toml(state_dir, server.url, server.root_url, window, turns, policy))
        config = wake_config.load_config_file(path, environ={})
        async with session.open_session(config, neo4j=False) as s:
            o = await wakes.run(config, s.stores, s.registry, agent_id="demo", tier="full", models=s.models, wake_id=uuid.uuid4())
            async with s.stores.pg_conn() as conn:
                rows = await context_events.turns(conn, o.wake_id)
                events = await context_events.recent(conn, "demo", since=dt.datetime(2000, 1, 1, tzinfo=dt.UTC), limit=1000)
    stop = o.thinking.stop_reason if o.thinking else "-"
    return rows, [e for e in events if e.wake_id == o.wake_id], str(stop)


async def main(turns: int, window: int, state_dir: Path) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    runs = {}
    for name, policy, compacting in (("sovereign", "sovereign", False), ("sovereign+compact", "sovereign", True), ("harness", "harness", False)):
        runs[name] = await _run(state_dir, window, turns, policy, compacting)
    print(f"pressure before each model call, {window}-token window, one 2,400-character tool result a turn")
    print("events: n narrowed max_tokens, R reminder, C choice point, K agent compaction, A automatic compaction")
    print(f"{'turn':>4} " + " ".join(f"{name:>20}" for name in runs))
    for turn in range(1, turns + 2):
        cells = []
        for rows, events, _ in runs.values():
            row = next((r for r in rows if r.turn == turn), None)
            marks = "".join(sorted({MARKS[e.kind] for e in events if e.turn == turn and e.kind in MARKS}))
            cells.append(f"{row.pressure:>6.3f} {marks:<3}" if row else "")
        if any(cells):
            print(f"{turn:>4} " + " ".join(f"{c:>20}" for c in cells))
    for name, (rows, events, stop) in runs.items():
        peak = max(r.pressure for r in rows)
        over = sum(1 for r in rows if r.prompt_tokens + r.max_tokens > window)
        print(f"{name}: {len(rows)} calls, peak {peak:.3f}, stopped {stop}, {len(events)} events, requests over the window: {over}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--window", type=int, default=18000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        asyncio.run(main(args.turns, args.window, Path(tmp)))
