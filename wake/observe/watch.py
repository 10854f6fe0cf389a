"""`wake status --watch`: the status view, redrawn in place every few seconds.

`render(snapshot)` is a pure function of one snapshot: the dict `wake status --json` prints
(replicas, running wakes, leases, next fires, trigger requests waiting) plus, under `recent`,
the newest ledger rows (as `wake ledger` reads them). `watch(fetch_snapshot, interval_s)` calls
the fetch again and again and redraws; a fetch that fails keeps the last view on screen, marked
stale with the reason, and the next one may succeed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ledgers.vocab import Status
from wake import clock, logs
from wake.errors import WakeError

Snapshot = Mapping[str, Any]
# Seconds between refreshes unless told otherwise.
DEFAULT_INTERVAL_S = 2.0
STATUS_STYLES: dict[str, str] = {
    Status.completed: "green", Status.quiet: "cyan", Status.failed: "bold red", Status.aborted: "yellow", Status.halted: "yellow",
    Status.abandoned: "magenta", Status.skipped: "dim", Status.missed: "yellow", Status.started: "blue",
}


def _time(value: object) -> dt.datetime | None:
    """A datetime from a datetime or an ISO 8601 string (the JSON form); None for anything else."""
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _utc(value: object) -> str:
    at = _time(value)
    return f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}" if at is not None and at.tzinfo else "-"


def _relative(now: dt.datetime, value: object) -> str:
    at = _time(value)
    if at is None or at.tzinfo is None:
        return "-"
    seconds = (at - now).total_seconds()
    ahead, size = seconds >= 0, abs(seconds)
    amount = f"{size:.0f}s" if size < 120 else f"{size / 60:.0f}m" if size < 7200 else f"{size / 3600:.1f}h"
    return f"in {amount}" if ahead else f"{amount} ago"


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> RenderableType:
    """A titled table, or the title and `none` when there are no rows."""
    if not rows:
        return Text.assemble((title, "bold"), ": none")
    table = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    for column in columns:
        table.add_column(column, no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else _cell(cell) for cell in row))
    return table


def _status(status: object) -> Text:
    return Text(_cell(status), style=STATUS_STYLES.get(str(status), ""))


def _duration(row: Mapping[str, object]) -> str:
    started, finished = _time(row.get("started_at")), _time(row.get("finished_at"))
    if started is None or finished is None:
        return "running" if started is not None and row.get("status") == "started" else "-"
    seconds = (finished - started).total_seconds()
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f}s"


def _cost(row: Mapping[str, Any]) -> str:
    cost = row.get("cost_usd")
    return f"${float(cost):.4f}" if row.get("model") and cost is not None else "-"


def _why(row: Mapping[str, object]) -> str:
    text = str(row.get("error") or row.get("note") or "")
    return text if len(text) <= 60 else text[:59] + "…"


def render(snapshot: Snapshot, *, stale: str | None = None) -> RenderableType:
    """The whole view of one snapshot. `stale`: why this snapshot is not the latest (a fetch failed)."""
    now = _time(snapshot.get("at")) or clock.now()
    replicas: Sequence[Mapping[str, object]] = snapshot.get("replicas") or []
    head: list[RenderableType] = [Text.assemble(("wake status", "bold"), f"  {_utc(now)} UTC  redis {snapshot.get('redis', '-')}")]
    if stale is not None:
        head.append(Text(f"stale: could not refresh ({stale}); showing {_utc(now)} UTC", style="bold red"))
    sections: list[RenderableType] = []
    if replicas:
        sections.append(_table(
            f"replicas ({len(replicas)} live)", ("REPLICA", "HOST", "PID", "VERSION", "UP SINCE (UTC)", "HEARTBEAT"),
            [(r.get("replica_id"), r.get("host"), r.get("pid"), r.get("version"), _utc(r.get("started_at")),
              _relative(now, r.get("heartbeat_at"))) for r in replicas],
        ))
    else:
        sections.append(Text(f"no daemon alive (no replica heartbeat in redis at {snapshot.get('redis', '-')})", style="bold yellow"))
    running: Sequence[Mapping[str, object]] = snapshot.get("running") or []
    sections.append(_table(
        "running wakes", ("AGENT", "TIER", "TRIGGER", "WAKE", "STARTED", "FENCE", "REPLICA"),
        [(w.get("agent"), w.get("tier"), w.get("trigger"), w.get("wake_id"), _relative(now, w.get("started_at")), w.get("fence"),
          w.get("replica_id")) for w in running],
    ))
    sections.append(_table(
        "leases", ("AGENT", "HELD", "HOLDER", "TTL LEFT", "FENCE"),
        [(r.get("agent"), "yes" if r.get("held") else "no", r.get("holder"), f"{r['ttl_s']:g}s" if r.get("ttl_s") is not None else None,
          r.get("fence")) for r in snapshot.get("leases") or []],
    ))
    if snapshot.get("daemon_alive", bool(replicas)):
        sections.append(_table(
            "next fires", ("AGENT", "TIER", "AT (UTC)", "WHEN"),
            [(f.get("agent"), f.get("tier"), _utc(f.get("at")) if f.get("at") else "not scheduled", _relative(now, f.get("at")))
             for f in snapshot.get("next_fires") or []],
        ))
    else:
        sections.append(Text("next fires: unknown (no daemon alive to schedule them)", style="dim"))
    recent: Sequence[Mapping[str, object]] = snapshot.get("recent") or []
    sections.append(_table(
        "recent outcomes", ("STARTED (UTC)", "AGENT", "TIER", "TRIGGER", "STATUS", "DURATION", "COST", "WAKE", "NOTE"),
        [(_utc(r.get("started_at")), r.get("agent_id"), r.get("tier"), r.get("trigger"), _status(r.get("status")), _duration(r), _cost(r),
          str(r.get("wake_id") or "")[:8], _why(r)) for r in recent],
    ))
    sections.append(Text(f"trigger requests waiting: {_cell(snapshot.get('pending_requests'))}"))
    return Group(*head, *(item for section in sections for item in (Text(""), section)))


def _problem(exc: Exception) -> str:
    if isinstance(exc, WakeError):
        return str(exc)
    return logs.redact_text(f"{type(exc).__name__}: {exc}")


async def watch(
    fetch_snapshot: Callable[[], Awaitable[Snapshot]], interval_s: float = DEFAULT_INTERVAL_S, *,
    console: Console | None = None, frames: int | None = None,
) -> None:
    """Fetch and draw, then again every `interval_s`, until cancelled (or `frames` draws)."""
    console = console or Console()
    last: Snapshot | None = None
    drawn = 0
    with Live(console=console, auto_refresh=False, transient=False) as live:
        while frames is None or drawn < frames:
            try:
                last, stale = await fetch_snapshot(), None
            except Exception as exc:  # noqa: BLE001 - any failure to fetch is shown, and the next fetch may work
                stale = _problem(exc)
            if last is None:
                view: RenderableType = Text(f"wake status: could not fetch the status: {stale}", style="bold red")
            else:
                view = render(last, stale=stale)
            live.update(view, refresh=True)
            drawn += 1
            if frames is None or drawn < frames:
                await asyncio.sleep(interval_s)
