"""The `memory` and `cloister` arrival blocks (docs/memory.md).

Both read what the wake's start found (`WakeContext.memory_state`): the repository the canary has
just audited, and whether the canary could run at all. `memory` is the file tree with each file's
description, within `agents.<id>.memory.block_max_chars` and with the exact totals; `cloister`
lists the open HALT and WARN findings (as the canary read them, when it recorded nothing new: the
same round trip). A canary that could not run fails both blocks ("could not
check: ..."), so an unaudited memory never reads as an empty one.
"""

from __future__ import annotations

from ledgers import memory_ledger as ledger
from wake.arrival import memory_render as render
from wake.arrival.engine import Found
from wake.context import WakeContext
from wake.errors import CanaryFailed, Disabled


def _checked(ctx: WakeContext) -> None:
    state = ctx.memory_state
    if not state.enabled:
        raise Disabled("memory is off for this agent (agents.<id>.memory.enabled)")
    if state.error is not None:
        raise CanaryFailed(state.error)


async def memory_tree(ctx: WakeContext) -> Found:
    _checked(ctx)
    repo = ctx.memory_state.repo
    if repo is None:  # a dry run before the first wake: nothing has created the repository
        return Found(text="memory: no repository yet; the first wake creates it", rows=0)
    shown = render.memory_block(repo.ls(), head=repo.head(), max_chars=ctx.agent.memory.block_max_chars)
    return Found(text=shown.text, rows=shown.total)


async def cloister(ctx: WakeContext) -> Found:
    _checked(ctx)
    canary = ctx.memory_state.canary
    view = canary.open if canary is not None else None
    if view is None:  # the canary recorded something (or did not run): read what is open now
        async with ctx.stores.pg_conn() as conn:  # wake's own reads: the light reset (docs/performance.md)
            view = await ledger.open_view(conn, ctx.agent_id)
    shown = render.cloister_block(view.rows, total=view.total, counts=view.counts)
    return Found(text=shown.text, rows=view.total)
