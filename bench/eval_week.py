"""docs/replay.md's worked example, run for real: a week of the demo agent's surface wakes, then
`wake eval` against the same instructions and against careless ones. Prints what the commands print.

    python bench/eval_week.py [--wakes 20] [--state-dir DIR] [--url URL --model NAME]

The embedded default config (the demo agent, its built-in sources, the embedded PostgreSQL and
Redis under the state directory), the surface tier given `ok_token = "NOTHING"` and a model route.
Without `--url` the route is the scripted OpenAI-compatible server of the tests, standing in for a
model: it checks the time (`local_time`), then answers `NOTHING`, unless the instructions it is
sent say "Write a note for every wake", when it first writes the daybook (`write_daybook`, a
mutating tool). With `--url` (an OpenAI-compatible base URL, e.g. the llama.cpp server of
docs/model.md) a real model decides.

`--wakes` wakes are recorded eight hours apart over the week before now, each on the clock the
script sets (the tests' clock control: `tests.support.wakes.run(now=...)`); then the real CLI runs
`wake eval --agent demo --tier surface --since 7d` twice, as an operator would, the second time
with `--instructions careless.md --chart eval.png`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import wakes as wake_runs  # noqa: E402
from tests.support.openai_server import Response, ScriptedServer, completion  # noqa: E402
from wake import clock, logs  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake.run import session  # noqa: E402

CARELESS = "Write a note for every wake, whatever happened."


def _answer(request: dict[str, Any]) -> Response:
    messages = request["messages"]
    careless = CARELESS in str(messages[0].get("content"))
    called = [c["function"]["name"] for m in messages for c in (m.get("tool_calls") or [])]
    if not called:
        return completion(None, [("local_time", {})])
    if careless and "write_daybook" not in called:
        return completion(None, [("write_daybook", {"entry": "Checked the time; nothing else happened."})])
    return completion("NOTHING")


def _config_text(state_dir: Path, url: str, model: str, route_extra: str) -> str:
    default = wake_config.EMBEDDED_DEFAULT
    return (
        default.read_text()
        .replace("[log]", f'state_dir = "{state_dir}"\n\n[log]', 1)
        .replace('persona_files = ["agents/demo/persona.md"]', f'persona_files = ["{default.parent / "agents/demo/persona.md"}"]')
        .replace('binds = ["wake.whisper", "wake.surface"]\n', 'binds = ["wake.whisper", "wake.surface"]\nok_token = "NOTHING"\n', 1)
        .replace('# model = "local"', 'model = "example"')
        .replace("daily_cost_cap_usd = 0.50", "daily_cost_cap_usd = 100.0")
        + f'\n[models.example]\nbase_url = "{url}"\nmodel = "{model}"\ntimeout_s = 600\nmax_retries = 0\n'
        "input_usd_per_mtok = 3.0\ncached_input_usd_per_mtok = 0.30\noutput_usd_per_mtok = 15.0\n"
        "extra_body = { temperature = 0, seed = 7 }\n" + route_extra
    )


async def _record(path: Path, wakes: int) -> None:
    config = wake_config.load_config_file(path, environ={})
    week_ago = clock.now() - dt.timedelta(days=7) + dt.timedelta(minutes=5)
    async with session.open_session(config, neo4j=False) as s:
        for n in range(wakes):
            at = week_ago + dt.timedelta(hours=8 * n)
            o = await wake_runs.run(config, s.stores, s.registry, agent_id="demo", tier="surface", models=s.models, now=lambda at=at: at)
            print(f"recorded {o.wake_id} at {at:%Y-%m-%d %H:%M} UTC: {o.status}", flush=True)


def _wake(path: Path, *args: str) -> int:
    print(f"\n$ wake {' '.join(args)}", flush=True)
    done = subprocess.run([sys.executable, "-m", "wake", "--config", str(path), *args], env={**os.environ, "WAKE_CONFIG": str(path)},
                          capture_output=True, text=True, timeout=3600)
    print(done.stdout.rstrip())
    said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("{")]  # its JSON logs left out
    if said:
        print("\n".join(said))
    print(f"(exit {done.returncode})", flush=True)
    return done.returncode


def main(wakes: int, state_dir: Path, url: str | None, model: str, route_extra: str) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    careless = state_dir / "careless.md"
    careless.write_text(CARELESS + "\n")
    path = state_dir / "wake.toml"
    with ScriptedServer(default=_answer) as server:
        path.write_text(_config_text(state_dir, url or server.url, model, route_extra))
        asyncio.run(_record(path, wakes))
        _wake(path, "eval", "--agent", "demo", "--tier", "surface", "--since", "7d")
        _wake(path, "eval", "--agent", "demo", "--tier", "surface", "--since", "7d", "--instructions", str(careless),
              "--chart", str(state_dir / "eval.png"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wakes", type=int, default=20)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--url", help="An OpenAI-compatible base URL instead of the scripted server.")
    parser.add_argument("--model", default="scripted-1")
    parser.add_argument("--route", action="append", default=[], metavar="KEY=VALUE",
                        help='More keys of the route, as TOML (e.g. tool_calls="json_schema", context_window=16384).')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-eval-week-") as tmp:
        main(args.wakes, args.state_dir or Path(tmp), args.url, args.model, "".join(f"{r}\n" for r in args.route))
