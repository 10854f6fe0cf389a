"""The model loop against a real llama.cpp server (SmolLM2-135M-Instruct, CPU). Prints figures; not a test.

    python bench/model.py [--wakes 2] [--tiers whisper,surface,full] [--url http://127.0.0.1:8080] [--count]

Without `--url` it starts tests.support.llama_server (built on first use: see tests/support/LLAMA.md)
with the ChatML tool template and an 8192-token context. The embedded default config (the demo
agent, its built-in sources and tools) with every tier routed to the server through a recording
proxy; budgets of 2 turns and 32 output tokens (and 32 for a summary) keep it short. `--count` sets `tokenizer_url` (every
prompt counted with /apply-template and /tokenize) instead of the estimate.

A second agent, `bench`, measures a wake with one forced tool call against the same wake made to
answer at once, both through a JSON-schema route (`tool_calls = "json_schema"`): its `surface`
tier's first turn must call `pin_note` (`tool_choice = { first = "pin_note", later = "none" }`),
its `full` tier may only answer (`tool_choice = "none"`); same binding, same arrival.

For each tier, `--wakes` consecutive wakes, the clock moving by the tier's interval: per wake the
requests, prompt / cached / completion tokens (the rows, which are the server's usage), the server's
prompt and generation time (its `timings`), and the wall time of the wake. The cached share is
cached / prompt tokens over the wakes after a tier's first: what llama.cpp's slot cache served.
The baseline, measured first in the same run, is the server's raw prompt throughput on one
2,000-token request with nothing cached, so figures from different machines can be compared.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledgers import introspection  # noqa: E402
from tests.support import llama_server  # noqa: E402
from tests.support import wakes as one_wake
from tests.support.recording_proxy import RecordingProxy  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake import logs
from wake.run import (
    session,  # noqa: E402
)

STEP = {"whisper": dt.timedelta(minutes=15), "surface": dt.timedelta(hours=1), "full": dt.timedelta(days=1)}
START = dt.datetime(2026, 11, 30, 8, 0, tzinfo=dt.UTC)
BUDGET = "budget = { max_turns = 2, max_tool_calls = 4, max_output_tokens = 32, max_cost_usd = 1.0 }"
FORCED = """
[tools]
surfaces = ["live", "live_write"]
modules = ["tests.support.live_tools"]

[models.llama_json]
base_url = "{url}"
model = "smollm2-135m"
context_window = 8192
timeout_s = 600
max_retries = 0
tool_calls = "json_schema"
extra_body = {{ temperature = 0 }}

[agents.bench]
timezone = "UTC"

[agents.bench.tiers.surface]
every = "1h"
binds = ["live_write"]
model = "llama_json"
tool_choice = {{ first = "pin_note", later = "none" }}
budget = {{ max_turns = 2, max_tool_calls = 1, max_output_tokens = 200, max_cost_usd = 1.0 }}

[agents.bench.tiers.full]
every = "1d"
binds = ["live_write"]
model = "llama_json"
tool_choice = "none"
budget = {{ max_turns = 2, max_tool_calls = 1, max_output_tokens = 200, max_cost_usd = 1.0 }}
"""
BASELINE_TEXT = "The lease ledger is honest and every wake is witnessed. " * 180  # about 2,000 tokens


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as res:
        return dict(json.loads(res.read()))


def baseline(root: str) -> str:
    # a fresh prefix, so nothing is served from the slot's cache
    body = {"messages": [{"role": "user", "content": f"{time.time_ns()} {BASELINE_TEXT}"}], "max_tokens": 16, "temperature": 0}
    t = _post(f"{root}/v1/chat/completions", body)["timings"]
    return (f"baseline: {t['prompt_n']} prompt tokens in {t['prompt_ms']:.0f} ms ({t['prompt_per_second']:.0f} tok/s), "
            f"{t['predicted_n']} generated in {t['predicted_ms']:.0f} ms ({t['predicted_per_second']:.1f} tok/s)")


def _config(state_dir: Path, proxy: RecordingProxy, count: bool) -> wake_config.Config:
    default = wake_config.EMBEDDED_DEFAULT
    text = (
        default.read_text()
        .replace("[log]", f'state_dir = "{state_dir}"\n\n[log]', 1)
        .replace('persona_files = ["agents/demo/persona.md"]', f'persona_files = ["{default.parent / "agents/demo/persona.md"}"]')
        .replace('# model = "local"', 'model = "llama"')
        .replace("daily_cost_cap_usd = 0.50", "daily_cost_cap_usd = 100.0")
        + f'\n[models.llama]\nbase_url = "{proxy.url}"\nmodel = "smollm2-135m"\ncontext_window = 8192\ntimeout_s = 600\n'
        + "max_retries = 0\nextra_body = { temperature = 0 }\n"
        + (f'tokenizer_url = "{proxy.root_url}"\n' if count else "")
        + "[think]\nsummary_max_tokens = 32\n"
    )
    text = re.sub(r"^budget = \{.*\}$", BUDGET, text, flags=re.MULTILINE)  # the demo's tiers; the bench agent keeps its own
    text += FORCED.format(url=proxy.url)
    path = state_dir / "wake.toml"
    path.write_text(text)
    return wake_config.load_config_file(path, environ={})


async def run(root: str, wakes: int, tiers: list[str], count: bool, state_dir: Path) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    print(baseline(root))
    with RecordingProxy(root) as proxy:
        config = _config(state_dir, proxy, count)
        async with session.open_session(config, neo4j=False) as s:
            print(f"{'tier':<8} {'wakes':>5} {'quiet':>5} {'req/wake':>8} {'prompt':>7} {'cached':>7} {'compl':>6} "
                  f"{'prompt ms':>9} {'gen ms':>7} {'wall ms':>8} {'cached share':>12}")
            for tier in tiers:
                rows, walls, prompt_ms, gen_ms = [], [], [], []
                later_prompt = later_cached = 0
                sent_before = len(proxy.completions())
                for i in range(wakes):
                    at = START + i * STEP[tier]
                    n = len(proxy.completions())
                    started = time.monotonic()
                    o = await one_wake.run(config, s.stores, s.registry, agent_id="demo", tier=tier,
                                             now=lambda at=at: at, models=s.models)
                    walls.append((time.monotonic() - started) * 1000)
                    mine = proxy.completions()[n:]
                    prompt_ms.append(sum(e.response.get("timings", {}).get("prompt_ms", 0.0) for e in mine))
                    gen_ms.append(sum(e.response.get("timings", {}).get("predicted_ms", 0.0) for e in mine))
                    async with s.stores.pg_conn() as conn:
                        row = await introspection.get(conn, o.wake_id)
                    assert row is not None
                    rows.append(row)
                    if i > 0:
                        later_prompt += row.prompt_tokens
                        later_cached += row.cached_tokens
                k = len(rows)
                quiet = sum(r.status == "quiet" for r in rows)
                stopped = sorted({f"{r.status}/{r.stop_reason}" for r in rows})
                per = {c: statistics.mean(getattr(r, c) for r in rows) for c in ("prompt_tokens", "cached_tokens", "completion_tokens")}
                share = f"{later_cached / later_prompt:.3f}" if later_prompt else "-"
                print(
                    f"{tier:<8} {k:>5} {quiet:>5} {(len(proxy.completions()) - sent_before) / k:>8.2f} {per['prompt_tokens']:>7.0f}"
                    f" {per['cached_tokens']:>7.0f} {per['completion_tokens']:>6.0f} {statistics.mean(prompt_ms):>9.0f}"
                    f" {statistics.mean(gen_ms):>7.0f} {statistics.mean(walls):>8.0f} {share:>12}  {', '.join(stopped)}"
                )
            print("\none forced tool call (agent bench, JSON-schema route), beside the same wake answering at once:")
            print(f"{'wake':<30} {'req':>4} {'calls':>5} {'prompt':>7} {'cached':>7} {'share':>6} {'compl':>6} {'wall ms':>8}")
            for tier, label in (("full", "answers at once"), ("full", "the same wake again"), ("surface", "one forced pin_note call")):
                n = len(proxy.completions())
                started = time.monotonic()
                o = await one_wake.run(config, s.stores, s.registry, agent_id="bench", tier=tier, now=lambda: START, models=s.models)
                wall = (time.monotonic() - started) * 1000
                async with s.stores.pg_conn() as conn:
                    row = await introspection.get(conn, o.wake_id)
                assert row is not None
                share = f"{row.cached_tokens / row.prompt_tokens:.3f}" if row.prompt_tokens else "-"
                print(f"{label:<30} {len(proxy.completions()) - n:>4} {row.tool_calls:>5} {row.prompt_tokens:>7} {row.cached_tokens:>7}"
                      f" {share:>6} {row.completion_tokens:>6} {wall:>8.0f}")
    print("per wake, means; prompt/gen ms are the server's own timings; cached share over each tier's wakes after its first.")
    print("quiet whispers made no request (the gate); a tier whose binding cannot fit the model's window stops before any call")
    print("(stop context_window): the demo's surface and full tiers bind more declarations than SmolLM2's 8,192 tokens hold.")
    print("'the same wake again' is an identical second wake: its share is what llama.cpp's slot cache served of its prompt.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wakes", type=int, default=2)
    parser.add_argument("--tiers", default="whisper,surface,full")
    parser.add_argument("--url", default=None, help="a running llama.cpp server's root URL")
    parser.add_argument("--count", action="store_true", help="count prompts with the server's /tokenize")
    args = parser.parse_args()
    tiers = [t for t in args.tiers.split(",") if t]
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        if args.url:
            asyncio.run(run(args.url.rstrip("/"), args.wakes, tiers, args.count, Path(tmp)))
            return
        cache = llama_server.default_cache_dir()
        binary, model = llama_server.fetch(cache)
        with llama_server.LlamaServer(Path(tmp) / "llama", binary=binary, model=model, ctx=8192,
                                      chat_template=llama_server.tool_template(cache)) as server:
            asyncio.run(run(server.root_url, args.wakes, tiers, args.count, Path(tmp)))


if __name__ == "__main__":
    main()
