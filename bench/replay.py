"""Replay benchmark against the scripted OpenAI-compatible server. Prints figures; not a test.

    python bench/replay.py [--wakes 6] [--state-dir DIR]

The embedded default config (demo agent, built-in sources), the surface tier routed to the scripted
server, priced like a paid model ($3 in, $0.30 cached in, $15 out per Mtok). `--wakes` surface wakes
are recorded (each makes one tool call, then answers), then each is replayed with the same route
(`wake.replay.run.replay`, as `wake replay ID` runs it). Per wake, beside each other: the wall
time of the wake (claim, arrival, binding, model loop, settle) and of its replay (reading the
recording, the model loop, storing the replay), requests, prompt / cached / completion tokens and
USD, and whether the replay made the same decisions. The scripted server answers at once, so the
times are wake's own overhead; against a real model both are dominated by the model's time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledgers import introspection  # noqa: E402
from tests.support import wakes as wake_runs  # noqa: E402
from tests.support.openai_server import Response, ScriptedServer, completion  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake import logs  # noqa: E402
from wake.replay import recording  # noqa: E402
from wake.replay.run import Candidate, replay  # noqa: E402
from wake.run import session  # noqa: E402


def _answer(request: dict[str, Any]) -> Response:
    if any(m["role"] == "tool" for m in request["messages"]):
        return completion("Checked the time; nothing needs doing. Daybook: quiet morning.")
    return completion(None, [("local_time", {})])


async def main(wakes: int, state_dir: Path) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    default = wake_config.EMBEDDED_DEFAULT
    with ScriptedServer(default=_answer) as server:
        text = (
            default.read_text()
            .replace("[log]", f'state_dir = "{state_dir}"\n\n[log]', 1)
            .replace('persona_files = ["agents/demo/persona.md"]', f'persona_files = ["{default.parent / "agents/demo/persona.md"}"]')
            .replace('# model = "local"', 'model = "scripted"')
            .replace("daily_cost_cap_usd = 0.50", "daily_cost_cap_usd = 100.0")
            + f'\n[models.scripted]\nbase_url = "{server.url}"\nmodel = "scripted-1"\n'
            "input_usd_per_mtok = 3.0\ncached_input_usd_per_mtok = 0.30\noutput_usd_per_mtok = 15.0\n"
        )
        path = state_dir / "wake.toml"
        path.write_text(text)
        config = wake_config.load_config_file(path, environ={})
        async with session.open_session(config, neo4j=False) as s:
            assert s.models is not None
            recorded = []
            for _ in range(wakes):
                sent = len(server.requests)
                started = time.perf_counter()
                o = await wake_runs.run(config, s.stores, s.registry, agent_id="demo", tier="surface", models=s.models)
                recorded.append((o.wake_id, (time.perf_counter() - started) * 1000, len(server.requests) - sent))
            print(f"{'wake':<9} {'':>8} {'ms':>8} {'req':>4} {'prompt':>7} {'cached':>7} {'compl':>6} {'USD':>10}  same")
            times: dict[str, list[float]] = {"wake": [], "replay": []}
            for wake_id, wake_ms, wake_requests in recorded:
                async with s.stores.pg_conn() as conn:
                    row = await introspection.get(conn, wake_id)
                    assert row is not None
                sent = len(server.requests)
                started = time.perf_counter()
                async with s.stores.pg_conn() as conn:
                    rec = await recording.read(conn, wake_id)
                out = await replay(s.stores, config, s.registry, rec, Candidate(), s.models)
                replay_ms = (time.perf_counter() - started) * 1000
                r = out.record
                times["wake"].append(wake_ms)
                times["replay"].append(replay_ms)
                print(f"{str(wake_id)[:8]:<9} {'recorded':>8} {wake_ms:>8.1f} {wake_requests:>4} {row.prompt_tokens:>7} {row.cached_tokens:>7}"
                      f" {row.completion_tokens:>6} {float(row.cost_usd):>10.6f}")
                print(f"{'':<9} {'replay':>8} {replay_ms:>8.1f} {len(server.requests) - sent:>4} {r.prompt_tokens:>7} {r.cached_tokens:>7}"
                      f" {r.completion_tokens:>6} {float(r.cost_usd):>10.6f}  {'yes' if r.report['same_decisions'] else 'NO'}")
            print(f"median ms: wake {statistics.median(times['wake']):.1f}, replay {statistics.median(times['replay']):.1f}"
                  f" (the scripted server answers at once: this is wake's own time)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wakes", type=int, default=6)
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        asyncio.run(main(args.wakes, args.state_dir or Path(tmp)))
