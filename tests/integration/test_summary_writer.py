"""The living summaries' writer: the fold_summary tool, fenced (docs/facts.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from ledgers.errors import StaleFence
from surfaces import loader
from tests.support import marked, sessions
from tests.support.ledger_ctx import wake_ctx
from wake.arrival import records
from wake.config import Config
from wake.stores import lease

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


async def _call(ctx: Any, **arguments: Any) -> Any:
    tool = loader.build(entry_points=False).get("fold_summary")
    jsonschema.validate(arguments, dict(tool.parameters))
    return await tool.handler(ctx, **arguments)


async def test_fold_summary_writes_the_next_version_and_its_deltas_under_the_fence(store_config: Callable[..., Config]) -> None:
    config = store_config()
    async with sessions.ready_stores(config) as st:
        held = await lease.acquire(st, "demo", ttl_ms=30_000)
        ctx = wake_ctx(config, st, NOW, fence=held.fence)
        first = await _call(ctx, aspect="presence", content="Writes late at night.")
        second = await _call(ctx, aspect="presence", content="Writes late, and early on Sundays.", deltas=["Sunday mornings", "  "])
        with pytest.raises(ValueError, match="aspect must be one of"):  # past the schema, the ledger refuses it too
            await loader.build(entry_points=False).get("fold_summary").handler(ctx, aspect="mood", content="x")
        shown = await records.living_summaries(ctx)
        await held.release()
        newer = await lease.acquire(st, "demo", ttl_ms=30_000)
        with pytest.raises(StaleFence):
            await _call(ctx, aspect="presence", content="stale")
        after = await records.living_summaries(wake_ctx(config, st, NOW))
        await newer.release()
    assert (first, second) == ({"aspect": "presence", "version": 1, "merged": 0}, {"aspect": "presence", "version": 2, "merged": 1})
    assert "### presence (derived, v2, folded 2026-11-29 13:00)\nWrites late, and early on Sundays.\n" in marked.plain(shown.text)
    assert "What changed since the last fold (2026-11-29): Sunday mornings" in marked.plain(shown.text)
    assert after.text == shown.text  # the stale fold wrote nothing

