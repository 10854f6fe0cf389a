"""Recall benchmark on the real embedded PostgreSQL. Prints figures; it is not a timed test.

    python bench/recall.py [--agents 2] [--daybook 100000] [--facts 50000] [--runs 200] [--state-dir DIR]

Fills `--agents` agents with `--daybook` daybook entries, `--facts` facts and a tenth as many
messages each (generate_series in SQL; the GIN indexes are rebuilt once after the load), then
times the `recall` tool end to end (probe and search, as a wake calls it) for one agent: p50 and
p99 over `--runs` runs for a rare term, a common term (a tenth of the rows match: the ranking
cost), a continuing topic and a request naming a person. Baselines, measured in the same run: the
daybook arrival block (an index range and a LIMIT), and the same search in a text search
configuration that has no index (a scan of every row; fewer runs).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledgers.vocab import Tier  # noqa: E402
from surfaces import recall  # noqa: E402
from surfaces.context import RecallSettings  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake import logs  # noqa: E402
from wake.arrival import records  # noqa: E402
from wake.context import WakeContext, WakeRequest  # noqa: E402
from wake.run import session  # noqa: E402

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
# 40 common words (each in about a tenth of the rows) and one rare one (one row in a thousand)
WORDS = (
    "garden tent kayak shift report boat paint window bread coffee train letter music winter summer river island market "
    "bicycle kitchen doctor school budget meeting photo forest lantern ladder carpet mirror pillow candle basket bucket "
    "hammer needle pocket rocket saddle wagon"
).split()

LOAD = """
INSERT INTO daybook (agent_id, entry, written_at)
SELECT $1, 'Entry ' || i || ': ' || w[1 + i % 40] || ' and ' || w[1 + (i / 40) % 40] || ', then ' || w[1 + (i / 7) % 40]
           || CASE WHEN i % 1000 = 0 THEN ' zeppelin' ELSE '' END || '. I looked at it again and wrote it down.',
       $4::timestamptz - make_interval(mins => i)
  FROM generate_series(1, $2) i, (SELECT $3::text[] AS w) words;
"""
LOAD_FACTS = """
INSERT INTO facts (agent_id, fact_key, fact_value, origin, recorded_at)
SELECT $1, 'fact.' || i, w[1 + i % 40] || ' ' || w[1 + (i / 40) % 40] || CASE WHEN i % 1000 = 0 THEN ' zeppelin' ELSE '' END,
       'did', $4::timestamptz - make_interval(mins => 2 * i)
  FROM generate_series(1, $2) i, (SELECT $3::text[] AS w) words;
"""
LOAD_CONTACT = """
INSERT INTO human_contact (agent_id, author, channel, body, received_at)
SELECT $1, (ARRAY['Anna', 'Bo', 'Cecilia'])[1 + i % 3], 'chat', 'About the ' || w[1 + i % 40] || ' and the ' || w[1 + (i / 3) % 40] || '.',
       $4::timestamptz - make_interval(mins => 10 * i)
  FROM generate_series(1, $2) i, (SELECT $3::text[] AS w) words;
"""


async def _load(conn: Any, agents: int, daybook: int, facts: int) -> float:
    started = time.perf_counter()
    indexes = await conn.fetch("SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE '%\\_recall\\_%'")
    for r in indexes:  # one bulk build after the load is much faster than maintaining the GIN indexes row by row
        await conn.execute(f"DROP INDEX {r['indexname']}")
    for n in range(agents):
        agent = "demo" if n == 0 else f"agent_{n}"
        await conn.execute(LOAD, agent, daybook, WORDS, NOW)
        await conn.execute(LOAD_FACTS, agent, facts, WORDS, NOW)
        await conn.execute(LOAD_CONTACT, agent, daybook // 10, WORDS, NOW)
    await conn.execute("SET maintenance_work_mem = '256MB'")
    for r in indexes:
        await conn.execute(r["indexdef"])
    await conn.execute("ANALYZE daybook, facts, human_contact")
    return time.perf_counter() - started


async def _time(call: Callable[[], Awaitable[Any]], runs: int) -> tuple[float, float, Any]:
    result = await call()  # warm
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = await call()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))], result


async def main(agents: int, daybook: int, facts: int, runs: int, state_dir: Path) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    path = state_dir / "wake.toml"
    # the bulk load and the index builds are single statements longer than the default 10 s
    path.write_text(
        f'state_dir = "{state_dir}"\n[postgres]\ncommand_timeout_s = 600\n'
        '[agents.demo]\ntimezone = "UTC"\n[agents.demo.tiers.full]\nbinds = ["wake"]\n'
    )
    config = wake_config.load_config_file(path, environ={})
    async with session.open_session(config, neo4j=False) as s:
        async with s.stores.pg_conn() as conn:
            load_s = await _load(conn, agents, daybook, facts)
            sizes = {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in ("daybook", "facts", "human_contact")}
        print(f"{agents} agents loaded in {load_s:.1f} s (indexes built after): " + ", ".join(f"{t} {n}" for t, n in sizes.items()))
        ctx = WakeContext(config=config, stores=s.stores, request=WakeRequest(agent_id="demo", tier=Tier.full), now=NOW)
        plain = RecallSettings(recent_entries=0)
        cases: list[tuple[str, RecallSettings, dict[str, Any], int]] = [
            ("rare term", plain, {"query": "zeppelin", "continuing": False}, runs),
            ("common term", plain, {"query": "kayak", "continuing": False}, runs),
            ("two common terms", plain, {"query": "kayak garden", "continuing": False}, runs),
            ("continuing topic", plain, {"query": "kayak", "continuing": True}, runs),
            ("named person", plain, {"query": "kayak", "continuing": False, "person": "Anna"}, runs),
            ("rare, default probe", RecallSettings(), {"query": "zeppelin", "continuing": False}, runs),
            ("BASELINE unindexed", RecallSettings(dictionary="danish", recent_entries=0), {"query": "zeppelin", "continuing": False},
             max(3, runs // 40)),
        ]
        p50, p99, found = await _time(lambda: records.recent_daybook(ctx), runs)
        print(f"  {'BASELINE daybook block':<24} p50 {p50:8.2f} ms  p99 {p99:8.2f} ms  ({runs} runs; rows {found.rows})")
        for label, settings, arguments, n in cases:
            query = arguments.pop("query")

            async def call(settings: RecallSettings = settings, query: str = query, arguments: dict[str, Any] = arguments) -> Any:
                return await recall.run(ctx, settings, query, **arguments)

            p50, p99, result = await _time(call, n)
            assert result["retrieval"] == "ok", result
            print(f"  {label:<24} p50 {p50:8.2f} ms  p99 {p99:8.2f} ms  ({n} runs; {result['candidates']} candidates, "
                  f"{len(result['records'])} shown, {result['result']})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--daybook", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        asyncio.run(main(args.agents, args.daybook, args.facts, args.runs, args.state_dir or Path(tmp)))
