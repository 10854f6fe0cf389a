"""The daemon's Prometheus metrics: one registry, small functions the daemon calls, and the HTTP
exposition (docs/metrics.md lists every metric).

Every label is bounded: `agent` and `tier` (never a wake id), a wake's status, a block (source)
name, a skip reason code, a store. A value outside its known set becomes `other`, so a label can
never carry free text (an error message, a secret) or grow without bound. Agents come from the
config (`set_agents`); until they are set, the first `SPARE_AGENTS` agent ids of a plain shape
are taken as they come.

Each `Metrics` has its own `CollectorRegistry` with the standard process, platform and GC
collectors, so a test can make several. The daemon installs one (`install`); the module-level
functions (`observe_settled`, `lease_lost`, ...) forward to it and do nothing when none is
installed, so `wake up` and the tests pay nothing for them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import re
import threading
import zoneinfo
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from ledgers.vocab import SETTLED, Retrieval, Status, Tier
from wake import clock
from wake.config import parse_listen
from wake.errors import ListenError

TIERS: tuple[str, ...] = tuple(Tier)
STATUSES: tuple[str, ...] = SETTLED
# Why a claimed or due slot did not run (the text before the first ':' of the daemon's reason).
SKIP_REASONS = (
    "slot_taken", "busy", "shutting_down", "lease_not_taken", "catch_up_skipped", "paused", "missed", "oneshot_taken", "store_unreachable",
    "inactive_hours", "died_after_claim",
)
BLOCK_STATES: tuple[str, ...] = tuple(Retrieval)
# Why agents moved between replicas (wake.daemon.ownership), and which way, seen from this replica.
HANDOVER_WHYS = ("start", "joined", "stopped", "expired", "heartbeat_lost", "heartbeat_restored", "configured", "unconfigured", "rebalanced")
HANDOVER_DIRECTIONS = ("gained", "lost")
STORES = ("postgres", "neo4j")
OTHER = "other"
# Label values taken as they come, when no known set is given: how many, and of what shape.
SPARE_AGENTS = 64
SPARE_BLOCKS = 128
_PLAIN_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")

# Histogram buckets, in seconds. Fire lag and loop lag are small when all is well; a wake with
# a model runs seconds to minutes; a block has `source_timeout_ms` (1.5 s by default).
FIRE_LAG_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
WAKE_DURATION_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
BLOCK_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2.5, 5)
LOOP_LAG_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# How often the loop-lag task wakes to measure.
LOOP_LAG_INTERVAL_S = 0.5
class Spend(Protocol):
    """What a wake's model loop spent (`wake.model.Usage`, `ledgers.introspection.Thinking`)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def cost_usd(self) -> float: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgentInfo:
    """What the metrics need to know of a configured agent."""

    tiers: tuple[str, ...] = TIERS
    daily_cost_cap_usd: float | None = None
    timezone: str = "UTC"


class BoundedLabel:
    """The values one label may take: the known ones, plus up to `spare` others of a plain shape
    as they first come; anything else is `other`."""

    def __init__(self, known: Iterable[str] = (), *, spare: int = 0) -> None:
        self.known = frozenset(known)
        self.spare = spare
        self._extra: set[str] = set()

    def __call__(self, value: str | None) -> str:
        if value is None:
            return OTHER
        if value in self.known or value in self._extra:
            return value
        if len(self._extra) < self.spare and _PLAIN_VALUE.match(value):
            self._extra.add(value)
            return value
        return OTHER


def reason_code(reason: str) -> str:
    """`busy: another wake of the agent holds ...` -> `busy`; `shutting down` -> `shutting_down`."""
    return reason.split(":", 1)[0].strip().lower().replace(" ", "_").replace("-", "_")


class _DailyCost(Collector):
    """`wake_daily_cost_usd`, `wake_daily_cost_cap_usd`, `wake_daily_cost_cap_remaining_usd` per
    agent with a cap. Spending counts for the agent's local day it was seen on: after the
    agent's midnight it reads 0 again until the next model turn says otherwise."""

    def __init__(self, now: Callable[[], dt.datetime]) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._agents: dict[str, AgentInfo] = {}
        self._spent: dict[str, tuple[dt.date, float]] = {}

    def set_agents(self, agents: Mapping[str, AgentInfo]) -> None:
        with self._lock:
            self._agents = dict(agents)

    def spent(self, agent: str, spent_usd: float) -> None:
        with self._lock:
            info = self._agents.get(agent)
            if info is not None:
                self._spent[agent] = (self._local_date(info), spent_usd)

    def _local_date(self, info: AgentInfo) -> dt.date:
        return self._now().astimezone(zoneinfo.ZoneInfo(info.timezone)).date()

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            agents, spent = dict(self._agents), dict(self._spent)
        spent_f, cap_f, left_f = self._families()
        for agent, info in sorted(agents.items()):
            if info.daily_cost_cap_usd is None:
                continue
            day, usd = spent.get(agent, (None, 0.0))
            today_usd = usd if day == self._local_date(info) else 0.0
            spent_f.add_metric([agent], today_usd)
            cap_f.add_metric([agent], info.daily_cost_cap_usd)
            left_f.add_metric([agent], max(0.0, info.daily_cost_cap_usd - today_usd))
        return [spent_f, cap_f, left_f]

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily("wake_daily_cost_usd", "USD spent today (the agent's local day), as of the last model turn seen.", labels=["agent"]),
            GaugeMetricFamily("wake_daily_cost_cap_usd", "The agent's daily_cost_cap_usd.", labels=["agent"]),
            GaugeMetricFamily("wake_daily_cost_cap_remaining_usd", "USD left under the daily cap today.", labels=["agent"]),
        )


class _Running(Collector):
    """`wake_wakes_running` and `wake_running_wake_age_seconds` (the oldest one's age) per agent
    and tier, from the daemon's list of running wakes at scrape time; zero for every configured
    (agent, tier) with none running."""

    def __init__(self, now: Callable[[], dt.datetime], agent: Callable[[str | None], str], tier: Callable[[str | None], str]) -> None:
        self._now, self._agent, self._tier = now, agent, tier
        self.source: Callable[[], Iterable[Mapping[str, object]]] = list
        self.slots: list[tuple[str, str]] = []

    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        count, age = self._families()
        now = self._now()
        counts: dict[tuple[str, str], int] = dict.fromkeys(self.slots, 0)
        oldest: dict[tuple[str, str], float] = dict.fromkeys(self.slots, 0.0)
        for wake in self._wakes():
            key = (self._agent(_text(wake.get("agent"))), self._tier(_text(wake.get("tier"))))
            counts[key] = counts.get(key, 0) + 1
            started = _aware(wake.get("started_at"))
            oldest[key] = max(oldest.get(key, 0.0), (now - started).total_seconds() if started else 0.0)
        for key in sorted(counts):
            count.add_metric(list(key), counts[key])
            age.add_metric(list(key), max(0.0, oldest[key]))
        return [count, age]

    def _wakes(self) -> list[Mapping[str, object]]:
        for _ in range(3):  # the loop may change the list while this thread copies it
            try:
                return list(self.source())
            except RuntimeError:
                continue
        return []

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily("wake_wakes_running", "Wakes running in this process now.", labels=["agent", "tier"]),
            GaugeMetricFamily(
                "wake_running_wake_age_seconds", "How long the oldest running wake has run (0: none running).", labels=["agent", "tier"]
            ),
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _aware(value: object) -> dt.datetime | None:
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if isinstance(value, dt.datetime) and value.tzinfo is not None else None


class Metrics:
    """Every metric of one daemon process, in its own registry."""

    def __init__(self, *, agents: Mapping[str, AgentInfo] | None = None, version: str = "", now: Callable[[], dt.datetime] = clock.now) -> None:
        registry = self.registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        Gauge("wake_build_info", "The running code's version (always 1).", ["version"], registry=registry).labels(version or "unknown").set(1)

        self._agent = BoundedLabel(spare=SPARE_AGENTS)
        self._tier = BoundedLabel(TIERS)
        self._status = BoundedLabel(STATUSES)
        self._reason = BoundedLabel(SKIP_REASONS)
        self._block = BoundedLabel(spare=SPARE_BLOCKS)
        self._block_state = BoundedLabel(BLOCK_STATES)
        self._store = BoundedLabel(STORES)

        self.wakes = Counter("wake_wakes", "Wakes settled, by status.", ["agent", "tier", "status"], registry=registry)
        self.fire_lag = Histogram(
            "wake_fire_lag_seconds", "From a slot (plus its jitter) to its wake running: claim, lease, and any wait for a turn.",
            ["agent", "tier"], buckets=FIRE_LAG_BUCKETS_S, registry=registry,
        )
        self.duration = Histogram(
            "wake_duration_seconds", "A wake from start to settle.", ["agent", "tier"], buckets=WAKE_DURATION_BUCKETS_S, registry=registry
        )
        self.block_latency = Histogram(
            "wake_arrival_block_latency_seconds", "One arrival block's source, start to result or timeout.", ["block"],
            buckets=BLOCK_LATENCY_BUCKETS_S, registry=registry,
        )
        self.blocks = Counter(
            "wake_arrival_blocks", "Arrival blocks assembled, by retrieval state (failed: could not check).", ["block", "state"], registry=registry
        )
        self.tokens = Counter(
            "wake_model_tokens", "Model tokens, by kind: prompt, completion, cached (part of prompt).", ["agent", "tier", "kind"], registry=registry
        )
        self.cost = Counter("wake_model_cost_usd", "Model cost in USD.", ["agent", "tier"], registry=registry)
        self.refusals = Counter(
            "wake_tool_refusals", "Tool calls refused: the tool was not in the wake's binding.", ["agent", "tier"], registry=registry
        )
        self._daemon_families(registry)
        self._daily = _DailyCost(now)
        registry.register(self._daily)
        self._running = _Running(now, self._agent_label, self._tier)
        registry.register(self._running)
        self.set_agents(agents or {})

    def _daemon_families(self, registry: CollectorRegistry) -> None:
        """The daemon's own: leases, fences, engines, slots, claims, handovers, ownership, the outbox."""
        self.lease_losses = Counter(
            "wake_lease_losses", "Agent leases lost while a wake held them (the wake is cancelled).", ["agent"], registry=registry
        )
        self.stale_fences = Counter(
            "wake_fence_stale_refusals", "Writes refused because a newer lease holder's fence exists.", ["agent", "store"], registry=registry
        )
        self.engine_restarts = Counter(
            "wake_engine_restarts", "Embedded engines found dead while processes used them, and started again.", ["engine"], registry=registry
        )
        self.skipped = Counter("wake_slots_skipped", "Slots that did not run, by reason.", ["agent", "tier", "reason"], registry=registry)
        self.loop_lag = Histogram(
            "wake_event_loop_lag_seconds", "How late the event loop woke a task that slept.", buckets=LOOP_LAG_BUCKETS_S, registry=registry
        )
        self.claims = Counter(
            "wake_slot_claims", "Slot claim attempts by this replica, by outcome (won, or taken by another first).", ["outcome"],
            registry=registry,
        )
        self.handovers = Counter(
            "wake_handovers", "Agents handed over to (gained) or from (lost) this replica, by why.", ["direction", "why"], registry=registry
        )
        self.owned = Gauge("wake_owned_agents", "Agents this replica schedules (its share of the membership).", registry=registry)
        self.owned.set_function(lambda: 0.0)
        self._handover_why = BoundedLabel(HANDOVER_WHYS)
        self._direction = BoundedLabel(HANDOVER_DIRECTIONS)
        self.outbox = Gauge("wake_outbox_backlog", "Entries in the outbox waiting to be delivered.", registry=registry)
        self.outbox.set_function(lambda: 0.0)
        self.side_restarts = Counter(
            "wake_side_task_restarts", "Side tasks (outbox, inbox, heartbeat, console, ...) that failed and were started again, by task.",
            ["task"], registry=registry,
        )
        self.side_down = Gauge("wake_side_tasks_down", "Side tasks down now, waiting out their backoff before a restart.", registry=registry)
        self.side_down.set_function(lambda: 0.0)
        self.open_incidents = Gauge("wake_open_incidents", "Open incidents per agent (docs/incidents.md), as of the last check.", ["agent"],
                                    registry=registry)
        self.last_settled = Gauge(
            "wake_last_settled_timestamp_seconds", "When the tier's newest wake that ran settled (Unix time), as of the last check; "
            "absent for a tier that never ran.", ["agent", "tier"], registry=registry,
        )

    def set_agents(self, agents: Mapping[str, AgentInfo]) -> None:
        """The configured agents (at start and on reload). Their counters start at zero, so a
        rate over them is defined from the first scrape; other agent ids become `other`."""
        if agents:
            self._agent = BoundedLabel(agents)
        self._agent_ids = list(agents)
        self._daily.set_agents(agents)
        self._running.slots = [(agent, self._tier(tier)) for agent, info in agents.items() for tier in info.tiers]
        for agent, info in agents.items():
            self.lease_losses.labels(agent)
            for store in STORES:
                self.stale_fences.labels(agent, store)
            for tier in info.tiers:
                for status in (Status.completed, Status.failed):
                    self.wakes.labels(agent, self._tier(tier), status)

    def set_outbox_backlog(self, count: Callable[[], float]) -> None:
        """`count` is called at each scrape, on the exposition's thread: it must be cheap and
        must not touch the event loop (return a number the daemon keeps up to date)."""
        self.outbox.set_function(count)

    def set_side_tasks_down(self, count: Callable[[], float]) -> None:
        """`wake_side_tasks_down` reads the supervisor's count when scraped."""
        self.side_down.set_function(count)

    def observe_side_task_failed(self, task: str) -> None:
        self.side_restarts.labels(task).inc()

    def set_open_incidents(self, counts: Mapping[str, int]) -> None:
        """Each configured agent's open incidents (zero when it has none); others count as `other`."""
        totals: dict[str, int] = dict.fromkeys(self._agent_ids, 0)
        for agent, n in counts.items():
            label = self._agent_label(agent)
            totals[label] = totals.get(label, 0) + n
        for label, n in totals.items():
            self.open_incidents.labels(label).set(n)

    def set_last_settled(self, settled: Mapping[tuple[str, str], dt.datetime]) -> None:
        """Each configured tier's newest settled row (`wake.daemon.incident_watch`); a tier with none
        has no sample (an alert on `absent(...)` sees it), nor has a tier no longer configured."""
        self.last_settled.clear()
        for (agent, tier), at in settled.items():
            if agent in self._agent_ids:
                self.last_settled.labels(agent, self._tier(tier)).set(at.timestamp())

    def set_owned(self, count: Callable[[], float]) -> None:
        """`wake_owned_agents` reads this replica's share when scraped."""
        self.owned.set_function(count)

    def observe_claim(self, won: bool) -> None:
        self.claims.labels("won" if won else "taken").inc()

    def observe_handover(self, direction: str, why: str, agents: int) -> None:
        self.handovers.labels(self._direction(direction), self._handover_why(why)).inc(agents)

    def set_running(self, wakes: Callable[[], Iterable[Mapping[str, object]]]) -> None:
        """`wakes` lists the wakes running now, each with `agent`, `tier` and `started_at` (a
        datetime or an ISO string), as the daemon's heartbeat does: `lambda: list(daemon.running.values())`.
        It is called at each scrape, on the exposition's thread."""
        self._running.source = wakes

    def _agent_label(self, agent: str | None) -> str:
        return self._agent(agent)

    # -- what the daemon calls ----------------------------------------------------------------------

    def observe_settled(self, agent: str, tier: str, status: str, duration_s: float, usage: Spend | None = None, refusals: int = 0) -> None:
        """A wake settled: its status, how long it took, and what its model loop spent."""
        a, t = self._agent(agent), self._tier(tier)
        self.wakes.labels(a, t, self._status(status)).inc()
        self.duration.labels(a, t).observe(max(0.0, duration_s))
        if usage is not None:
            self.tokens.labels(a, t, "prompt").inc(max(0, usage.prompt_tokens))
            self.tokens.labels(a, t, "completion").inc(max(0, usage.completion_tokens))
            self.tokens.labels(a, t, "cached").inc(max(0, usage.cached_tokens))
            self.cost.labels(a, t).inc(max(0.0, usage.cost_usd))
        if refusals > 0:
            self.refusals.labels(a, t).inc(refusals)

    def observe_abandoned(self, agent: str, tier: str) -> None:
        """A wake left `started` by a dead process was closed `abandoned`."""
        self.wakes.labels(self._agent(agent), self._tier(tier), "abandoned").inc()

    def observe_fire_lag(self, agent: str, tier: str, lag_s: float) -> None:
        self.fire_lag.labels(self._agent(agent), self._tier(tier)).observe(max(0.0, lag_s))

    def observe_block(self, name: str, latency_ms: float, state: str) -> None:
        """One arrival block: `state` is its retrieval (`ok`, `failed`, `disabled`)."""
        block = self._block(name)
        self.block_latency.labels(block).observe(max(0.0, latency_ms) / 1000)
        self.blocks.labels(block, self._block_state(state)).inc()

    def observe_skipped(self, agent: str, tier: str, reason: str) -> None:
        """A slot that did not run; `reason` is the daemon's (`busy: ...` counts as `busy`)."""
        self.skipped.labels(self._agent(agent), self._tier(tier), self._reason(reason_code(reason))).inc()

    def lease_lost(self, agent: str) -> None:
        self.lease_losses.labels(self._agent(agent)).inc()

    def stale_fence(self, agent: str, store: str = "postgres") -> None:
        self.stale_fences.labels(self._agent(agent), self._store(store)).inc()

    def observe_daily_cost(self, agent: str, spent_usd: float) -> None:
        """Today's total for the agent (what `DailyCap.add` returned), after a model turn."""
        self._daily.spent(agent, spent_usd)

    def observe_loop_lag(self, lag_s: float) -> None:
        self.loop_lag.observe(max(0.0, lag_s))


async def measure_loop_lag(metrics: Metrics, interval_s: float = LOOP_LAG_INTERVAL_S) -> None:
    """A side task: sleep `interval_s` again and again and record how much later than asked the
    loop woke it. A blocked loop shows as lag (and, under systemd, as missed watchdog pings)."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(interval_s)
        metrics.observe_loop_lag(loop.time() - before - interval_s)


# -- the process's metrics ------------------------------------------------------------------------

_installed: Metrics | None = None


def install(metrics: Metrics | None) -> None:
    """Make `metrics` the one the module-level functions feed (None: feed none)."""
    global _installed
    _installed = metrics


def observe_settled(agent: str, tier: str, status: str, duration_s: float, usage: Spend | None = None, refusals: int = 0) -> None:
    if (m := _installed) is not None:
        m.observe_settled(agent, tier, status, duration_s, usage, refusals)


def observe_side_task_failed(task: str) -> None:
    if (m := _installed) is not None:
        m.observe_side_task_failed(task)


def observe_abandoned(agent: str, tier: str) -> None:
    if (m := _installed) is not None:
        m.observe_abandoned(agent, tier)


def observe_fire_lag(agent: str, tier: str, lag_s: float) -> None:
    if (m := _installed) is not None:
        m.observe_fire_lag(agent, tier, lag_s)


def observe_block(name: str, latency_ms: float, state: str) -> None:
    if (m := _installed) is not None:
        m.observe_block(name, latency_ms, state)


def observe_skipped(agent: str, tier: str, reason: str) -> None:
    if (m := _installed) is not None:
        m.observe_skipped(agent, tier, reason)


def lease_lost(agent: str) -> None:
    if (m := _installed) is not None:
        m.lease_lost(agent)


def engine_restarted(engine: str) -> None:
    if (m := _installed) is not None:
        m.engine_restarts.labels(engine).inc()


def stale_fence(agent: str, store: str = "postgres") -> None:
    if (m := _installed) is not None:
        m.stale_fence(agent, store)


def observe_claim(won: bool) -> None:
    if (m := _installed) is not None:
        m.observe_claim(won)


def observe_handover(direction: str, why: str, agents: int) -> None:
    if (m := _installed) is not None:
        m.observe_handover(direction, why, agents)


def observe_daily_cost(agent: str, spent_usd: float) -> None:
    if (m := _installed) is not None:
        m.observe_daily_cost(agent, spent_usd)


# -- the exposition ---------------------------------------------------------------------------------




@dataclasses.dataclass(frozen=True, kw_only=True)
class Exposition:
    """The HTTP server of /metrics, running on its own thread."""

    host: str
    port: int
    server: WSGIServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def serve(listen: str, metrics: Metrics) -> Exposition:
    """Start serving `metrics` over HTTP on `listen` (`HOST:PORT`), on a thread of its own so a
    scrape never waits for the event loop. Raises ListenError (exit 78) with one line."""
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        raise ListenError(f"bad metrics listen address: {exc}") from None
    try:
        server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise ListenError(f"cannot serve metrics on {listen}: {exc.strerror or exc}") from exc
    return Exposition(host=host, port=int(server.server_address[1]), server=server, thread=thread)
