"""The console's agent page lists the agent's open toxic flows beside the tool-pin findings and
accepts one at its tier as `wake tools accept-flow` does (the same ledger call), over real
PostgreSQL; the flow comes from `wake.witness.flows.vet` over a binding of labelled tools."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from ledgers import tool_flows as flow_ledger
from surfaces import flow_labels
from tests.support import console_pages
from wake import stores
from wake.config import Config
from wake.console import data, form_actions
from wake.errors import InvalidInput, NotFound
from wake.stores import prepared
from wake.witness import flows

T0 = dt.datetime(2026, 12, 6, 10, 0, tzinfo=dt.UTC)
async def test_a_toxic_flow_is_listed_and_accepted_from_the_agent_page(store_config: Callable[..., Config]) -> None:
    config = store_config()
    binding = [console_pages.labelled("inbox", flow_labels.UNTRUSTED_INPUT), console_pages.labelled("vault", flow_labels.PRIVATE_DATA),
               console_pages.labelled("webhook", flow_labels.EGRESS)]
    async with stores.connected(config) as st:
        await prepared.prepare_schema(st)
        async with st.pg_conn() as conn:
            refused = await flows.vet(conn, "demo", "full", binding, "refuse", T0)
            assert refused.refused == ("webhook",)
            listed = [p for p in await data.pins(conn, "demo") if p["kind"] == "toxic_flow"]
            flow_id = refused.held.flow_id
            assert [p["id"] for p in listed] == [f"full/{flow_id}"] and "egress webhook" in listed[0]["why"]
            assert await data.pins(conn, "other") == []  # an agent's flows are its own
            with pytest.raises(InvalidInput):
                await form_actions.accept(conn, config, "demo", "toxic_flow", "no-slash", by="ops-anna", why=None, at=T0)
            with pytest.raises(NotFound):
                await form_actions.accept(conn, config, "demo", "toxic_flow", "surface/" + str(flow_id), by="ops-anna", why=None, at=T0)
            done = await form_actions.accept(conn, config, "demo", "toxic_flow", f"full/{flow_id}", by="ops-anna", why=None, at=T0)
            assert "accepted toxic flow" in done.message and "by ops-anna" in done.message
            assert await data.pins(conn, "demo") == []
            again = await flows.vet(conn, "demo", "full", binding, "refuse", T0 + dt.timedelta(hours=1))
            recorded = await flow_ledger.findings(conn, include_closed=True, limit=5)
    assert again.accepted and not again.refused and again.finding_id is None
    assert [(f.state, f.accepted_by) for f in recorded] == [("accepted", "ops-anna")]
