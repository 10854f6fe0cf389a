"""Epistemic-ledger arrival benchmark on the real embedded PostgreSQL. Prints figures; it is not a
timed test.

    python bench/epistemic.py [--agents 10] [--runs 100] [--state-dir DIR]

Fills `--agents` agents with a long history each (facts with supersession chains and quarantined
ones, commitments, actions, daybook entries, summary folds), then times each arrival source of
the epistemic ledgers for one agent: p50 and p99 latency over `--runs` runs. The figure to watch
is that none grows with history: every query is bounded by an index and a LIMIT, and the totals
are COUNTs over an index range.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledgers.vocab import Tier
from wake import config as wake_config  # noqa: E402
from wake import logs
from wake.arrival import records as recall
from wake.arrival import settled  # noqa: E402
from wake.context import WakeContext, WakeRequest  # noqa: E402
from wake.run import session

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
FACTS, CHAIN, UNVERIFIED = 4000, 3, 1000
COMMITMENTS, OPEN = 3000, 400
ACTIONS, DAYBOOK, FOLDS = 20000, 5000, 500


def _history(agent: str) -> dict[str, list[tuple[Any, ...]]]:
    msg = uuid.uuid4()
    facts: list[tuple[Any, ...]] = []
    for i in range(FACTS):
        previous = None
        for link in range(CHAIN if i % 10 == 0 else 1):  # one key in ten has a chain
            fact_id = uuid.uuid4()
            last = link == (CHAIN if i % 10 == 0 else 1) - 1
            at = NOW - dt.timedelta(days=400 - i * 0.09 - link)
            facts.append((fact_id, agent, "general", f"key_{i}", f"value {i}.{link}", "did", "active" if last else "superseded",
                          None, None, previous, json.dumps([{"type": "message", "ref": str(msg)}]) if i % 7 == 0 else "[]",
                          None, at, None if last else at + dt.timedelta(hours=12)))
            previous = fact_id
    facts += [(uuid.uuid4(), agent, "general", f"rumour_{i}", f"rumour {i}", "saw", "unverified", None, msg, None, "[]", None,
               NOW - dt.timedelta(days=i % 300), None) for i in range(UNVERIFIED)]
    return {
        "human_contact": [(msg, agent, "henke", "chat", "a message", NOW - dt.timedelta(days=500))],
        "facts": facts,
        "commitments": [(agent, f"commitment {i}", (NOW + dt.timedelta(days=i % 30)).date(), "open" if i < OPEN else "done",
                         None if i < OPEN else "done", None, NOW - dt.timedelta(hours=i), None if i < OPEN else NOW - dt.timedelta(hours=i - 1))
                        for i in range(COMMITMENTS)],
        "last_actions": [(agent, "wake.surface", "add_commitment", f"action {i}", "{}", None, None, NOW - dt.timedelta(minutes=7 * i))
                         for i in range(ACTIONS)],
        "daybook": [(agent, None, f"entry {i}", NOW - dt.timedelta(hours=3 * i)) for i in range(DAYBOOK)],
        "settled_state": [(agent, "timereport", f"state {i}", (NOW - dt.timedelta(days=i)).date(), NOW - dt.timedelta(days=i)) for i in range(365)],
        "living_summary_trail": [(agent, aspect, v + 1, json.dumps([f"delta {v}"]), NOW - dt.timedelta(days=FOLDS - v))
                                 for aspect in ("life_lately", "presence") for v in range(FOLDS)],
        "living_summaries": [(agent, aspect, FOLDS, f"{aspect} now", NOW - dt.timedelta(days=1)) for aspect in ("life_lately", "presence")],
    }


COLUMNS = {
    "human_contact": ("message_id", "agent_id", "author", "channel", "body", "received_at"),
    "facts": ("fact_id", "agent_id", "category", "fact_key", "fact_value", "origin", "status", "attested_ref", "source_ref",
              "supersedes_id", "anchors", "wake_id", "recorded_at", "superseded_at"),
    "commitments": ("agent_id", "title", "due_on", "status", "outcome", "wake_id", "created_at", "completed_at"),
    "last_actions": ("agent_id", "surface", "tool", "summary", "arguments", "wake_id", "fence", "acted_at"),
    "daybook": ("agent_id", "wake_id", "entry", "written_at"),
    "settled_state": ("agent_id", "subject", "state", "state_on", "settled_at"),
    "living_summary_trail": ("agent_id", "aspect", "version", "merged_deltas", "folded_at"),
    "living_summaries": ("agent_id", "aspect", "version", "content", "folded_at"),
}


async def main(agents: int, runs: int, state_dir: Path) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    path = state_dir / "wake.toml"
    path.write_text(f'state_dir = "{state_dir}"\n[agents.demo]\ntimezone = "Europe/Stockholm"\n[agents.demo.tiers.full]\nbinds = ["wake"]\n')
    config = wake_config.load_config_file(path, environ={})
    async with session.open_session(config, neo4j=False) as s:
        started = time.perf_counter()
        async with s.stores.pg_conn() as conn:
            for n in range(agents):
                for table, rows in _history("demo" if n == 0 else f"agent_{n}").items():
                    await conn.copy_records_to_table(table, records=rows, columns=COLUMNS[table])
            await conn.execute("ANALYZE")
            sizes = {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in COLUMNS}
        print(f"history of {agents} agents loaded in {time.perf_counter() - started:.1f} s: "
              + ", ".join(f"{t} {n}" for t, n in sizes.items()))
        ctx = WakeContext(config=config, stores=s.stores, request=WakeRequest(agent_id="demo", tier=Tier.full), now=NOW)
        for name, fn in (("settled_facts", settled.settled_facts), ("provenance_facts", recall.provenance_facts),
                         ("living_summaries", recall.living_summaries), ("daybook", recall.recent_daybook)):
            await fn(ctx)  # warm
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                found = await fn(ctx)
                times.append((time.perf_counter() - t0) * 1000)
            times.sort()
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            print(f"  {name:<17} p50 {statistics.median(times):6.2f} ms  p99 {p99:6.2f} ms  rows {found.rows}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        asyncio.run(main(args.agents, args.runs, args.state_dir or Path(tmp)))
