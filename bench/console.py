"""The console's wake page, rendered server-side over a ledger of 100,000 rows, beside the same
wake through `wake show --json`. Prints figures; it is not a timed test.

    python bench/console.py [--rows 100000] [--runs 50] [--state-dir DIR]

On the real embedded PostgreSQL: one wake of the demo agent is recorded for real, then a wake with
20 arrival blocks (about 1 KB of text each, stored in the content store), 10 bound tools and 10
confirmed tool calls (`last_actions`), then `--rows` more rows of the agent copied from it in SQL
(spread over the past, mixed statuses). Measured in this run:

1. `GET /wakes/<id>` through the console's ASGI application in process (routing, every read of
   the page, the live verification of the 30 hashes, the template), without a network in between;
2. the page's reads alone (`wake.console.data.wake_page`);
3. the baseline: what `wake show <id> --json` does once connected (`introspection.get` and the
   CLI's JSON), in process; and the whole command as a subprocess (its start-up included);
4. the timeline (`GET /`, 200 wakes) and the agent page at the same size, for scale.

The goal: the wake page within 200 ms (median and p95 are printed).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from ledgers import actions, introspection  # noqa: E402
from ledgers.vocab import Tier  # noqa: E402
from wake import clock, logs  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake.cli import render  # noqa: E402
from wake.console import app, data, guard  # noqa: E402
from wake.context import WakeRequest  # noqa: E402
from wake.run import cycle, session  # noqa: E402
from wake.witness import manifest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BLOCKS, TOOLS, CALLS = 20, 10, 10
GOAL_MS = 200.0
CHUNK = 5000
# copied per row: everything but the row's identity, time, slot and chain link
SKIPPED = {"wake_id", "started_at", "finished_at", "scheduled_for", "chain_seq", "chain", "status"}


def _config(state_dir: Path) -> wake_config.Config:
    path = state_dir / "wake.toml"
    default = wake_config.EMBEDDED_DEFAULT
    path.write_text(
        default.read_text().replace("[log]", f'state_dir = "{state_dir}"\n\n[log]', 1)
        .replace('persona_files = ["agents/demo/persona.md"]', f'persona_files = ["{default.parent / "agents/demo/persona.md"}"]')
    )
    return wake_config.load_config_file(path, environ={})


async def _seed(s: session.Session, rows: int) -> uuid.UUID:
    """The measured wake (20 blocks, 10 tools, 10 calls) and `rows` more of the agent."""
    real = await cycle.run_wake(s, WakeRequest(agent_id="demo", tier=Tier.full))
    assert real.recorded, real.error
    texts = {f"block_{i:02d}": f"block {i}: " + " ".join(f"line {j} of what the source found" for j in range(30)) for i in range(BLOCKS)}
    tools = list(real.binding)[:TOOLS]
    assert len(tools) == TOOLS, f"the demo's full tier binds {len(real.binding)} tools; the bench needs {TOOLS}"
    block_hashes = {n: manifest.sha256_text(t) for n, t in texts.items()}
    tool_hashes = {t.name: manifest.tool_hash(t) for t in tools}
    now = clock.now()
    row = introspection.WakeRow(
        wake_id=uuid.uuid4(), agent_id="demo", tier="full", trigger="manual", scheduled_for=None, started_at=now,
        manifest_root=manifest.root_hash("demo", "full", block_hashes, tool_hashes),
        blocks={n: {"hash": h, "cache_tier": "volatile", "retrieval": "ok", "result": "present", "reason": None, "latency_ms": 1.5, "rows": 3}
                for n, h in block_hashes.items()},
        tool_hashes=tool_hashes, registry_tool_count=20,
        host="bench", pid=os.getpid(), version="bench", config_hash="bench", diff=real.diff,
        contents=manifest.contents_of(texts, tools), arrival_order=list(texts),
    )
    async with s.stores.pg_conn() as conn:
        await introspection.insert(conn, row, status="completed", thinking=introspection.Thinking(model="bench-model", turns=4, tool_calls=CALLS))
        for i in range(CALLS):
            await actions.record(conn, agent_id="demo", surface="wake.full", tool=tools[i % len(tools)].name, summary=f"call {i}",
                                 arguments={"n": i, "text": "x" * 80}, wake_id=row.wake_id, fence=None, acted_at=now + dt.timedelta(microseconds=i))
        columns = [r["column_name"] for r in await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'wake_introspection_ledger' ORDER BY ordinal_position")]
        copied = [c for c in columns if c not in SKIPPED]
        for first in range(1, rows + 1, CHUNK):  # in chunks: each statement stays within the pool's command timeout
            await conn.execute(
                f"INSERT INTO wake_introspection_ledger (wake_id, started_at, finished_at, status, {', '.join(copied)}) "
                f"SELECT gen_random_uuid(), $2::timestamptz - g * interval '37 seconds', "
                f"$2::timestamptz - g * interval '37 seconds' + interval '80 ms', "
                f"(ARRAY['completed','quiet','quiet','failed','halted','skipped'])[1 + g % 6], {', '.join(copied)} "
                f"FROM wake_introspection_ledger, generate_series($3::int, $4::int) g WHERE wake_id = $1",
                row.wake_id, now, first, min(rows, first + CHUNK - 1),
            )
        await conn.execute("ANALYZE")
        total = await conn.fetchval("SELECT count(*) FROM wake_introspection_ledger")
    print(f"ledger: {total} rows; the measured wake {row.wake_id}: {BLOCKS} blocks, {TOOLS} tools, {CALLS} tool calls")
    return row.wake_id


async def _times(fn: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    await fn()  # warm: templates compiled, statements prepared
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _row(label: str, ms: list[float]) -> str:
    p95 = sorted(ms)[max(0, int(len(ms) * 0.95) - 1)]
    return f"  {label:<52} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms   (min {min(ms):.1f})"


async def main(rows: int, runs: int, state_dir: Path) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    config = _config(state_dir)
    async with session.open_session(config, neo4j=False) as s:
        wake_id = await _seed(s, rows)
        console = app.Console(config=lambda: config, stores=s.stores, guard=guard.Guard(token=None, loopback=True, read_only=True, token_source="-"))
        transport = httpx.ASGITransport(app=app.build(console))
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:

            async def page(path: str) -> None:
                answer = await http.get(path)
                assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])

            async def reads() -> None:
                async with s.stores.pg_conn() as conn:
                    await data.wake_page(conn, wake_id, clock.now())

            async def show_json() -> None:
                async with s.stores.pg_conn() as conn:
                    render.to_json(await introspection.get(conn, wake_id))

            body = (await http.get(f"/wakes/{wake_id}")).text
            assert body.count('data-block="') == BLOCKS and "OK: every hash recomputed" in body
            assert all(f"<td>call {i}</td>" in body for i in range(CALLS)), "the page shows every tool call"
            print(f"wake page: {len(body) / 1024:.0f} KB of HTML")
            print(f"in process, {runs} runs each:")
            wake_page = await _times(lambda: page(f"/wakes/{wake_id}"), runs)
            print(_row("console GET /wakes/<id> (reads, verify, template)", wake_page))
            print(_row("  of which the page's reads and the verification", await _times(reads, runs)))
            print(_row("baseline: `wake show --json` once connected", await _times(show_json, runs)))
            print(_row("console GET / (timeline, 200 wakes)", await _times(lambda: page("/"), max(5, runs // 5))))
            print(_row("console GET /agents/demo", await _times(lambda: page("/agents/demo"), max(5, runs // 5))))
    # the whole command, as an operator runs it (interpreter start-up and connecting included)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WAKE_CONFIG": str(state_dir / "wake.toml")}
    wake = Path(sys.executable).parent / "wake"
    cli = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([str(wake), "show", str(wake_id), "--json"], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cli.append((time.perf_counter() - started) * 1000)
    print(_row("baseline: `wake show <id> --json` as a subprocess", cli))
    verdict = "within" if statistics.median(wake_page) <= GOAL_MS else "OVER"
    print(f"goal: the wake page in <= {GOAL_MS:.0f} ms server-side: median {statistics.median(wake_page):.1f} ms, {verdict}")
    subprocess.run([str(wake), "engines", "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        asyncio.run(main(args.rows, args.runs, args.state_dir or Path(tmp)))
