"""What the tamper-evident wake ledger costs on disk, per 1,000 wakes, on the real embedded PostgreSQL.
Prints figures; it is not a timed test.

    python bench/ledger_storage.py [--wakes 300] [--state-dir DIR]

Runs `--wakes` wakes of the demo agent (whisper, surface and full in turn, built-in sources, no
model) and measures, after `VACUUM FULL` so dead row versions do not count:

- the wake ledger's rows (`wake_introspection_ledger` with its indexes and TOAST, the chain
  columns included) and the chain heads;
- the content store (`manifest_contents`): every distinct block text and tool declaration once;
- the baseline, measured in the same run: the bytes of every block text and tool declaration
  of every wake, as a design that stored them on each row would hold them (before compression).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledgers.vocab import Tier  # noqa: E402
from wake import config as wake_config  # noqa: E402
from wake import logs  # noqa: E402
from wake.context import WakeRequest  # noqa: E402
from wake.run import cycle, session  # noqa: E402
from wake.witness import manifest  # noqa: E402

TABLES = ("wake_introspection_ledger", "agent_chain_heads", "manifest_contents")


async def _sizes(conn: object) -> dict[str, int]:
    out = {}
    for table in TABLES:
        await conn.execute(f"VACUUM FULL {table}")  # type: ignore[attr-defined]
        out[table] = int(await conn.fetchval("SELECT pg_total_relation_size($1::regclass)", table))  # type: ignore[attr-defined]
    return out


async def main(wakes: int, state_dir: Path) -> None:
    logs.configure("json", "warning", stream=sys.stderr)
    path = state_dir / "wake.toml"
    default = wake_config.EMBEDDED_DEFAULT
    path.write_text(
        default.read_text().replace("[log]", f'state_dir = "{state_dir}"\n\n[log]', 1)
        .replace('persona_files = ["agents/demo/persona.md"]', f'persona_files = ["{default.parent / "agents/demo/persona.md"}"]')
    )
    config = wake_config.load_config_file(path, environ={})
    async with session.open_session(config, neo4j=False) as s:
        async with s.stores.pg_conn() as conn:
            before = await _sizes(conn)
        payload, distinct = 0, set()
        tiers = [t for t in (Tier.whisper, Tier.surface, Tier.full) if t in config.agents["demo"].tiers]
        for i in range(wakes):
            outcome = await cycle.run_wake(s, WakeRequest(agent_id="demo", tier=tiers[i % len(tiers)]))
            assert outcome.recorded, outcome.error
            contents = manifest.contents_of({b.name: b.text for b in outcome.blocks}, outcome.binding)
            payload += sum(len(body.encode("utf-8")) for _, body in contents.values())
            distinct |= set(contents)
        async with s.stores.pg_conn() as conn:
            after = await _sizes(conn)
            added = float(await conn.fetchval(
                "SELECT avg(pg_column_size(chain) + pg_column_size(chain_seq) + pg_column_size(arrival_order)) FROM wake_introspection_ledger"
            ))
    per = 1000 / wakes
    grown = {t: (after[t] - before[t]) * per for t in TABLES}
    print(f"ledger storage, {wakes} wakes of demo ({', '.join(tiers)} in turn), per 1,000 wakes:")
    print(f"  wake rows (hashes, states, diff, chain)   {grown['wake_introspection_ledger'] / 1e6:8.2f} MB")
    print(f"    of which the chain and arrival order    {added * 1000 / 1e6:8.2f} MB  ({added:.0f} B a row)")
    print(f"  content store ({len(distinct)} distinct texts)      {grown['manifest_contents'] / 1e6:8.2f} MB")
    print(f"  baseline: every text on every row (raw)   {payload * per / 1e6:8.2f} MB")
    stored = grown["manifest_contents"]
    print(f"  content store / baseline                  {stored / (payload * per):8.3f}")
    print(f"  chain heads (one row per agent, fixed)    {after['agent_chain_heads'] / 1e3:8.1f} kB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wakes", type=int, default=300)
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as tmp:
        asyncio.run(main(args.wakes, args.state_dir or Path(tmp)))
