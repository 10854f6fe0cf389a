"""`wake demo seed`: give the demo agent something in every ledger, so a first `wake up` shows
every arrival block doing its job; and `wake demo wake`'s config: the agent's surface tier on the
embedded model (docs/model.md, "The embedded model").

The seed is idempotent: everything is written in one transaction, keyed on a fixed message id;
when that message is already there, nothing of this module's own data is written again. The
retraction ledger's demo row (idempotent itself) is added in the same transaction.
"""

from __future__ import annotations

import collections
import datetime as dt
import uuid
import zoneinfo
from collections.abc import Callable
from pathlib import Path

import asyncpg

from ledgers import actions, commitments, contact, daybook, facts, retractions, settled, summaries
from wake.config import Config
from wake.config.sections import BudgetConfig, ModelRoute, ThinkConfig, ToolChoice

Days = Callable[[int], dt.datetime]  # a date n days before the seed's now
_NS = uuid.UUID("6f1d0c5e-8a47-4f0e-9a43-2f3c1de0b5a7")


# The demo wake: a surface wake whose first turn must call `local_time` (read-only, no arguments:
# SmolLM2 cannot get it wrong, and the grammar of a JSON-schema route holds it to that one tool) and
# whose second answers, with nothing to call (so nothing it writes lands in a ledger but its daybook
# entry). It binds the whisper tools (7): the surface binding's 15 declarations, written out in the
# system message, come to about 8,700 tokens, past SmolLM2's 8,192; these to about 2,300.
DEMO_TIER = "surface"
DEMO_TOOL = "local_time"
DEMO_ROUTE = "embedded"
DEMO_BINDS = ("wake.whisper",)
DEMO_BUDGET = BudgetConfig(max_turns=2, max_tool_calls=2, max_output_tokens=192, max_cost_usd=0.01)
DEMO_SUMMARY_MAX_TOKENS = 96


def demo_config(config: Config, agent_id: str) -> tuple[Config, str]:
    """The config with the agent's surface tier on an embedded route (the config's first one, else
    one added as `embedded`), binding the whisper tools, its first turn calling `local_time` and its
    second answering; and the route's name."""
    route_name = next((name for name, r in config.models.items() if r.kind == "embedded"), None)
    models = dict(config.models)
    if route_name is None:
        route_name = DEMO_ROUTE if DEMO_ROUTE not in models else f"wake_demo_{DEMO_ROUTE}"
        models[route_name] = ModelRoute.model_validate({"kind": "embedded"})
    agent = config.agents[agent_id]
    tier = agent.tiers[DEMO_TIER].model_copy(update={
        "model": route_name, "binds": DEMO_BINDS, "tool_choice": ToolChoice(first=DEMO_TOOL, later="none"), "budget": DEMO_BUDGET,
    })
    think = ThinkConfig.model_validate({**config.think.model_dump(), "summary_max_tokens": DEMO_SUMMARY_MAX_TOKENS})
    demo = config.model_copy(update={
        "models": models, "think": think,
        "agents": {**config.agents, agent_id: agent.model_copy(update={"tiers": {**agent.tiers, DEMO_TIER: tier}})},
    })
    demo._hash = None  # the copy's own hash, computed when a wake records it
    return demo, route_name


def _id(agent_id: str, name: str) -> uuid.UUID:
    return uuid.uuid5(_NS, f"{agent_id}:{name}")


async def seed(conn: asyncpg.Connection, agent_id: str, timezone: str, now: dt.datetime, probe_root: Path) -> dict[str, int]:
    """Seed the agent's demo data; returns what was added per ledger ({} when already seeded)."""
    async with conn.transaction():
        added = await _own(conn, agent_id, timezone, now)
        await retractions.seed_demo(conn, agent_id, now, probe_root)
    return added


async def _own(conn: asyncpg.Connection, agent_id: str, timezone: str, now: dt.datetime) -> dict[str, int]:
    days: Days = lambda n: now - dt.timedelta(days=n)  # noqa: E731 - a local shorthand for the dates below
    marker = await contact.record(
        conn, message_id=_id(agent_id, "m-dagskift"), agent_id=agent_id, author="henke", channel="chat",
        body="Dagskift runs 07:00-16:00 until the end of September.", received_at=days(60),
    )
    if marker is None:
        return {}
    n = collections.Counter({"human_contact": 1})
    local_today = now.astimezone(zoneinfo.ZoneInfo(timezone)).date()
    await _messages(conn, agent_id, days, n)
    await _facts(conn, agent_id, days, n)
    await _commitments(conn, agent_id, days, local_today, n)
    await _settled_and_actions(conn, agent_id, now, local_today, n)
    await _summaries(conn, agent_id, days, n)
    await _daybook(conn, agent_id, days, n)
    return dict(n)


async def _messages(conn: asyncpg.Connection, agent_id: str, days: Days, n: collections.Counter[str]) -> None:
    messages = {
        "m-kvallsskift": "From October my Kvällsskift runs 15:00-23:00, Monday to Thursday.",
        "m-trip": "We talked about the trip yesterday, it was nice to plan a little.",
        "m-box": "The storage box in the basement is number 14, the key hangs by the door.",
    }
    for offset, (name, body) in enumerate(messages.items()):
        await contact.record(
            conn, message_id=_id(agent_id, name), agent_id=agent_id, author="henke", channel="chat", body=body,
            received_at=days(40 - 15 * offset),
        )
        n["human_contact"] += 1


async def _facts(conn: asyncpg.Connection, agent_id: str, days: Days, n: collections.Counter[str]) -> None:
    n["facts"] += 1
    old = await facts.remember(
        conn, agent_id=agent_id, key="shift_pattern", value="Dagskift runs 07:00-16:00", origin="saw", category="work",
        source_ref=_id(agent_id, "m-dagskift"), recorded_at=days(58), fact_id=_id(agent_id, "f-dagskift"),
    )
    n["facts"] += 1
    await facts.supersede(
        conn, agent_id=agent_id, fact_id=old.fact_id, value="Kvällsskift runs 15:00-23:00", origin="saw",
        source_ref=_id(agent_id, "m-kvallsskift"), recorded_at=days(39), new_fact_id=_id(agent_id, "f-kvallsskift"),
    )
    n["facts"] += 1
    await facts.remember(
        conn, agent_id=agent_id, key="storage_box", value="basement box number 14, key by the door", origin="saw",
        category="home", source_ref=_id(agent_id, "m-box"), recorded_at=days(9), fact_id=_id(agent_id, "f-box"),
    )
    n["facts"] += 1
    # Unattested: the cited message never says this. It is stored unverified and stays out of arrivals.
    await facts.remember(
        conn, agent_id=agent_id, key="travel_plan", value="flight to Lisbon booked for 12 December", origin="saw",
        category="plans", source_ref=_id(agent_id, "m-trip"), recorded_at=days(24), fact_id=_id(agent_id, "f-trip"),
    )
    n["facts"] += 1
    await facts.remember(
        conn, agent_id=agent_id, key="worker_canary", value="exited 0 with a 26-byte artifact on disk", origin="did",
        category="ops", anchors=[{"type": "file", "ref": "workers/canary/artifacts/probe.txt"}], recorded_at=days(2),
        fact_id=_id(agent_id, "f-canary"),
    )


async def _commitments(conn: asyncpg.Connection, agent_id: str, days: Days, local_today: dt.date, n: collections.Counter[str]) -> None:
    titles = [
        ("Send Henke the October timesheet summary", 2), ("Renew the storage box lease", 10), ("Read the worker canary logs", None),
        ("Draft the retraction audit note", 5), ("Ask about the December trip", None), ("Check the nightly backup restore", 1),
    ]
    for i, (title, due_in) in enumerate(titles):
        n["commitments"] += 1
        await commitments.add(
            conn, agent_id=agent_id, title=title, due_on=local_today + dt.timedelta(days=due_in) if due_in is not None else None,
            created_at=days(12 - 2 * i),
        )
    n["commitments"] += 1
    done = await commitments.add(conn, agent_id=agent_id, title="Water the balcony plants", due_on=None, created_at=days(20))
    await commitments.complete(conn, agent_id=agent_id, commitment_id=done, completed_at=days(19), outcome="watered; rain forecast")


async def _settled_and_actions(conn: asyncpg.Connection, agent_id: str, now: dt.datetime, local_today: dt.date, n: collections.Counter[str]) -> None:
    n["settled_state"] += 1
    await settled.record_state(
        conn, agent_id=agent_id, subject="timereport", state="reported: Kvällsskift 15:00-23:00, 8 h",
        state_on=local_today - dt.timedelta(days=1), settled_at=now - dt.timedelta(hours=10),
    )
    for hours, tool, summary in ((3, "add_commitment", "committed to check the nightly backup restore"),
                                 (30, "complete_commitment", "closed 'Water the balcony plants'"),
                                 (80, "write_daybook", "wrote the evening entry")):
        n["last_actions"] += 1
        await actions.record(
            conn, agent_id=agent_id, surface="wake.surface", tool=tool, summary=summary, arguments={}, wake_id=None, fence=None,
            acted_at=now - dt.timedelta(hours=hours),
        )


async def _summaries(conn: asyncpg.Connection, agent_id: str, days: Days, n: collections.Counter[str]) -> None:
    n["living_summary_folds"] += 1
    await summaries.fold(conn, agent_id=agent_id, aspect="life_lately", content="Henke works days; autumn is quiet.",
                         deltas=["started tracking shifts"], folded_at=days(30))
    n["living_summary_folds"] += 1
    await summaries.fold(conn, agent_id=agent_id, aspect="life_lately",
                         content="Henke moved to evening shifts (Kvällsskift) in October; a December trip is being talked about.",
                         deltas=["shift moved from Dagskift to Kvällsskift", "a December trip is being discussed (not booked)"],
                         folded_at=days(1))
    n["living_summary_folds"] += 1
    await summaries.fold(conn, agent_id=agent_id, aspect="presence", content="Messages come in the evenings, after 23:00 on shift days.",
                         deltas=["evening contact pattern after the shift change"], folded_at=days(1))


async def _daybook(conn: asyncpg.Connection, agent_id: str, days: Days, n: collections.Counter[str]) -> None:
    n["daybook"] += 1
    await daybook.append(
        conn, agent_id=agent_id, wake_id=None, entry="Quiet day. Checked the canary worker: exit 0, artifact on disk.", written_at=days(2)
    )
    n["daybook"] += 1
    await daybook.append(
        conn,
        agent_id=agent_id,
        wake_id=None,
        entry="The trip is talk, not a booking; I keep it out of my facts until Henke says more.",
        written_at=days(1),
    )
