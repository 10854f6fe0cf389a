"""A process frozen inside a fenced transaction (issue 41) holds the agent's fence row FOR SHARE;
before, a newer lease holder's fence advance waited on it for as long as the freeze lasted. Every
pooled connection now has `idle_in_transaction_session_timeout` = the lease TTL, so PostgreSQL
ends the frozen session and the advance goes through. The holder is a real process (wake's own
stores and `lease.fenced`), stopped with SIGSTOP."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

import asyncpg

from tests.support import pooler
from wake import stores
from wake.config import Config
from wake.stores import prepared

HOLDER = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from wake import stores
    from wake.config import load_config_file
    from wake.stores import lease

    async def main():
        config = load_config_file(Path(sys.argv[1]), environ={})
        async with stores.connected(config, neo4j=False, redis=False) as st:
            async with lease.fenced(st, "demo", 7) as conn:
                await conn.execute("SELECT 1")
                print("fenced", flush=True)
                await asyncio.sleep(600)

    asyncio.run(main())
""")


async def test_a_frozen_fence_holder_does_not_block_the_next_holder(store_config: Callable[..., Config]) -> None:
    config = store_config("[daemon]\nlease_ttl_s = 1\n")
    async with stores.connected(config, neo4j=False) as st:
        await prepared.prepare_schema(st)
        async with st.pg_conn() as conn:
            await conn.execute("INSERT INTO agent_fences (agent_id, fence) VALUES ('demo', 7) ON CONFLICT (agent_id) DO UPDATE SET fence = 7")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "PG", "REDIS_URL"))}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(config.path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, env=env)
    assert holder.stdout is not None and holder.stderr is not None
    try:
        seen = b""
        deadline = time.monotonic() + 120
        while b"fenced" not in seen and holder.poll() is None and time.monotonic() < deadline:
            if select.select([holder.stdout], [], [], 1.0)[0]:
                seen += os.read(holder.stdout.fileno(), 4096)
        assert b"fenced" in seen, holder.stderr.read() if holder.poll() is not None else seen
        holder.send_signal(signal.SIGSTOP)  # frozen inside the transaction that locked the fence row
        async with stores.connected(config, neo4j=False) as st, st.pg_conn() as conn:
            async with conn.transaction():
                await conn.execute("SET LOCAL lock_timeout = '60s'")  # bounded (and postgres.command_timeout_s): without the setting, a timeout
                try:
                    await conn.execute("UPDATE agent_fences SET fence = 8 WHERE agent_id = 'demo'")  # the next holder's advance
                    advanced = True
                except asyncpg.LockNotAvailableError:
                    advanced = False
            fence = await conn.fetchval("SELECT fence FROM agent_fences WHERE agent_id = 'demo'")
            timeouts = await conn.fetchval("SELECT setting FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'")
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()
        holder.stderr.close()
    assert advanced and fence == 8
    # through a pooler in transaction mode wake sends no session setting: the pooler's own
    # idle_transaction_timeout ended the frozen transaction (tests/support/external_stores.sh)
    assert timeouts == ("0" if pooler.active() else "1000")
