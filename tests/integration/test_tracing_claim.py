"""A scheduled wake's trace over real PostgreSQL and Redis (spans to the SDK's in-memory exporter;
tests/acceptance/test_traces.py reads a `wake up`'s back from a real Jaeger): the claim and the
lease are children of the wake's span, every span names the slot, and the row, written by its own
writer, carries the trace id; a slot that did not run has its span too, and its row the same id."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ledgers import controls, introspection
from ledgers.vocab import Trigger
from tests.support import agents as agent_configs
from tests.support import sessions
from wake.config import Config
from wake.context import WakeRequest
from wake.observe import tracing
from wake.run import claim, session

AGENTS = agent_configs.toml(tiers={"whisper": agent_configs.whisper("1h")}, timezone="UTC", extra=[agent_configs.PERSONA])
SLOT = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    tracing.shutdown()
    exporter = InMemorySpanExporter()
    tracing.configure({}, exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.shutdown()


def _finished(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    tracing.flush()
    return list(exporter.get_finished_spans())


async def test_a_scheduled_wake_is_one_trace_with_its_claim_and_lease(store_config: Callable[..., Config],
                                                                      exported: InMemorySpanExporter) -> None:
    config = store_config(agents=AGENTS)
    async with sessions.ready_stores(config) as st:
        s = session.Session(config=config, stores=st, registry=session.build_registry(config), models=None)
        request = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=SLOT)
        outcome = await claim.run(s, request, owner="t", claim=claim.Claim(by="r1"), now=lambda: SLOT)
        async with st.pg_conn() as conn:
            row = await introspection.get(conn, request.wake_id)
    assert outcome is not None and outcome.status == "completed" and row is not None
    spans = _finished(exported)
    (root,) = [sp for sp in spans if sp.parent is None]
    assert root.name == "wake.run" and row.trace_id == format(root.context.trace_id, "032x")
    children = {sp.name for sp in spans if sp.parent is not None and sp.parent.span_id == root.context.span_id}
    assert {"wake.claim", "wake.lease", "wake.bind", "wake.manifest"} <= children and any(n.startswith("wake.source ") for n in children)
    for sp in spans:
        attrs = dict(sp.attributes or {})
        assert (attrs["wake.id"], attrs["wake.agent"], attrs["wake.tier"], attrs["wake.slot"]) == (
            str(request.wake_id), "demo", "whisper", SLOT.isoformat()), sp.name
        assert format(sp.context.trace_id, "032x") == row.trace_id
    root_attrs = dict(root.attributes or {})
    assert root_attrs["wake.status"] == "completed" and root_attrs["wake.manifest_root"] == row.manifest_root


async def test_a_paused_slot_has_its_span_and_its_row_the_trace_id(store_config: Callable[..., Config],
                                                                    exported: InMemorySpanExporter) -> None:
    config = store_config(agents=AGENTS)
    async with sessions.ready_stores(config) as st:
        s = session.Session(config=config, stores=st, registry=session.build_registry(config), models=None)
        async with st.pg_conn() as conn:
            await controls.pause(conn, agent_id="demo", tier=None, paused_by="op", paused_at=SLOT - dt.timedelta(hours=1), until=None,
                                 reason="maintenance")
        request = WakeRequest(agent_id="demo", tier="whisper", trigger=Trigger.schedule, scheduled_for=SLOT)
        outcome = await claim.run(s, request, owner="t", claim=claim.Claim(by="r1"), now=lambda: SLOT)
        async with st.pg_conn() as conn:
            row = await introspection.get(conn, request.wake_id)
    assert outcome is None and row is not None and row.status == "skipped"
    spans = _finished(exported)
    (root,) = [sp for sp in spans if sp.parent is None]
    assert dict(root.attributes or {})["wake.status"] == "not run"
    assert row.trace_id == format(root.context.trace_id, "032x")
    assert {sp.name for sp in spans} == {"wake.run", "wake.claim"}
