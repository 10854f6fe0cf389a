"""Prompt-cache benchmark against the scripted OpenAI-compatible server. Prints figures; not a test.

    python bench/prompt_cache.py [--wakes 4] [--state-dir DIR]

The embedded default config (demo agent, built-in sources) with every tier routed to the scripted
server, priced like a paid model ($3 in, $0.30 cached in, $15 out per Mtok; the server reports
no cost, so wake computes it). Each wake that thinks makes one tool call, then answers. For each
tier, `--wakes` consecutive wakes, the clock moving by the tier's interval:

- the share of the first request's bytes that is a common prefix with the previous wake's first
  request (what a provider's prompt cache can serve), computed from the arrival blocks exactly as
  the client serialises them; it is checked against the bytes the server received;
- requests, prompt / cached / completion tokens and USD per wake, as recorded on the rows.
  Cached tokens are the server's: the prefix a request shares with the request before it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledgers import introspection  # noqa: E402
from tests.support import wakes as wake_runs  # noqa: E402
from tests.support.openai_server import Response, ScriptedServer, completion  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake import logs
from wake.run import (
    cycle,
    session,  # noqa: E402
)
from wake.think import prompt

STEP = {"whisper": dt.timedelta(minutes=15), "surface": dt.timedelta(hours=1), "full": dt.timedelta(days=1)}
START = dt.datetime(2026, 11, 30, 8, 0, tzinfo=dt.UTC)


def _answer(request: dict[str, Any]) -> Response:
    if any(m["role"] == "tool" for m in request["messages"]):
        return completion("Checked the time; nothing needs doing. Daybook: quiet morning.")
    return completion(None, [("local_time", {})])


def _first_body(config: wake_config.Config, outcome: cycle.WakeOutcome) -> bytes:
    """The first request of a wake, byte for byte as `wake.model.Client` sends it."""
    route = config.models["scripted"]
    budget = config.tier("demo", outcome.tier).budget
    body: dict[str, Any] = {"model": route.model}
    if outcome.binding:
        body["tools"] = [prompt.tool_spec(t) for t in outcome.binding]
    body["messages"] = prompt.messages(outcome.blocks)
    if outcome.binding:
        body["tool_choice"] = "auto"
    body["max_tokens"] = budget.max_output_tokens
    return json.dumps({**body, **route.extra_body}, ensure_ascii=False).encode("utf-8")


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
            print(
                f"{'tier':<8} {'wakes':>5} {'quiet':>5} {'prefix share':>19} {'req/wake':>8} "
                f"{'prompt':>7} {'cached':>7} {'compl':>6} {'USD/wake':>10}"
            )
            for tier in ("whisper", "surface", "full"):
                shares: list[float] = []
                rows: list[introspection.WakeRecord] = []
                previous: bytes | None = None
                requests_before = len(server.requests)
                for i in range(wakes):
                    at = START + i * STEP[tier]
                    sent_before = len(server.requests)
                    o = await wake_runs.run(config, s.stores, s.registry, agent_id="demo", tier=tier, now=lambda at=at: at, models=s.models)
                    body = _first_body(config, o)
                    if len(server.requests) > sent_before and server.requests[sent_before].raw != body:
                        raise SystemExit(f"bench bug: the computed first request of {tier} wake {i} differs from the one sent")
                    if previous is not None:
                        shares.append(prompt.shared_prefix_share(previous, body))
                    previous = body
                    async with s.stores.pg_conn() as conn:
                        row = await introspection.get(conn, o.wake_id)
                    assert row is not None
                    rows.append(row)
                n = len(rows)
                quiet = sum(r.status == "quiet" for r in rows)
                per = {k: sum(float(getattr(r, k)) for r in rows) / n for k in ("prompt_tokens", "cached_tokens", "completion_tokens", "cost_usd")}
                share = f"{statistics.mean(shares):.3f} (min {min(shares):.3f})" if shares else "-"
                print(
                    f"{tier:<8} {n:>5} {quiet:>5} {share:>19} {(len(server.requests) - requests_before) / n:>8.2f} {per['prompt_tokens']:>7.0f}"
                    f" {per['cached_tokens']:>7.0f} {per['completion_tokens']:>6.0f} {per['cost_usd']:>10.6f}"
                )
            print("prefix share: common prefix of consecutive wakes' first requests / the longer request;")
            print("quiet whispers made no request (the gate); their share is of the request they would have sent.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wakes", type=int, default=4)
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        asyncio.run(main(args.wakes, args.state_dir or Path(tmp)))
