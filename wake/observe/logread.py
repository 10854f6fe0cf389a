"""`wake logs`: JSON log lines read back the way a terminal shows them, filtered.

    journalctl -u wake -f -o cat | wake logs --agent demo
    wake logs --wake 3f2a1b daemon.jsonl

Each JSON event is rendered by structlog's ConsoleRenderer, the renderer `wake` itself uses on a
terminal: one line per event, keys aligned, colours when stdout is a terminal. A line that is
not a JSON event (a traceback printed by a crash, a line from something else) passes through
unchanged, whatever the filters, and never stops the reading.

Most lines of a wake carry `agent`, `tier` and `wake_id` (bound to the wake's logger). A line
that does not is attributed from the lines before it (`Story`): to the wake whose lease fence it
names, else to the only wake of its agent that is open (started, not yet settled), else, when it
names no agent, to the only wake open at all. Process-wide events (`daemon.*`, `control.*`, ...)
are never attributed that way. With several wakes open at once such a line stays unattributed
and a `--wake`, `--agent` or `--tier` filter leaves it out.

`--wake ID` tells one wake's story: the events that led to it (the `trigger.received` of a
manual wake, the `wake.catch_up` of a catch-up, the `lease.acquired` it ran under) are held back
until that wake starts and shown just before its `wake.started`; then every event of the wake
and every event that names it (`wake.skipped` by a replica that lost its slot, `wake.abandoned`,
`lease.lost` and `fence.stale` under its fence) up to `wake.settled`.
"""

from __future__ import annotations

import collections
import dataclasses
import fnmatch
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import click
import structlog

from ledgers.vocab import Tier

LEVELS = ("debug", "info", "warning", "error", "critical")
_LEVEL_RANK = {**{name: rank for rank, name in enumerate(LEVELS)}, "warn": 2, "exception": 3, "fatal": 4}
TIERS: tuple[str, ...] = tuple(Tier)
# Events of the process rather than of one wake: never attributed to "the only wake open".
PROCESS_EVENTS = ("daemon.*", "control.*", "trigger.*", "schema.*", "notify.*")
# How often a followed file is looked at again once its end is reached.
FOLLOW_POLL_S = 0.25
# Wakes remembered as open (started, not yet settled); a log that lost its settle lines stays bounded.
MAX_OPEN_WAKES = 4096
# sysexits-style statuses of the command (README: Exit statuses).
EXIT_NOT_FOUND = 1
EXIT_INTERRUPTED = 130

Event = dict[str, Any]


def parse(line: str) -> Event | None:
    """The event of one JSON log line, or None for any line that is not one."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("event"), str):
        return None
    return value


def level_rank(event: Mapping[str, object]) -> int:
    """Where the event's level stands in LEVELS; an event without a level counts as info."""
    return _LEVEL_RANK.get(str(event.get("level", "info")).lower(), _LEVEL_RANK["info"])


# -- which wake an event belongs to ------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Owner:
    """The wake, agent and tier an event is attributed to (each None when not known)."""

    wake_id: str | None = None
    agent: str | None = None
    tier: str | None = None


def _text_field(event: Mapping[str, object], key: str) -> str | None:
    value = event.get(key)
    return value if isinstance(value, str) and value else None


def named_wake(event: Mapping[str, object]) -> str | None:
    """The wake id the event names itself: `wake_id`, or a field ending in `_wake_id`."""
    if (wake_id := _text_field(event, "wake_id")) is not None:
        return wake_id
    for key, value in event.items():
        if key.endswith("_wake_id") and isinstance(value, str) and value:
            return value
    return None


def _is_process_event(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in PROCESS_EVENTS)


@dataclasses.dataclass(slots=True)
class _Prelude:
    """An event that comes before the wake it leads to, held until that wake starts."""

    seq: int
    event: Event
    matches: Callable[[Mapping[str, object]], bool]


class Story:
    """Follows wakes through a stream of events to say whom each event belongs to."""

    def __init__(self) -> None:
        self._open: collections.OrderedDict[str, Owner] = collections.OrderedDict()
        self._fences: collections.OrderedDict[tuple[str, int], str] = collections.OrderedDict()
        self._preludes: dict[tuple[str, ...], _Prelude] = {}
        self._seq = 0

    @staticmethod
    def is_prelude(event: Mapping[str, object]) -> bool:
        return event.get("event") in ("lease.acquired", "trigger.received", "wake.catch_up")

    def see(self, event: Event) -> tuple[Owner, list[Event]]:
        """The event's owner, and the held events (oldest first) that turn out to lead to it
        (only when the event is a `wake.started`)."""
        self._seq += 1
        name = str(event.get("event"))
        agent, tier = _text_field(event, "agent"), _text_field(event, "tier")
        if self.is_prelude(event):
            self._hold(name, agent, tier, event)
            return Owner(None, agent, tier), []
        owner = self._owner(name, event, agent, tier)
        led: list[Event] = []
        if name == "wake.started" and owner.wake_id is not None:
            self._remember(self._open, owner.wake_id, owner, MAX_OPEN_WAKES)
            led = self._claim_preludes(owner.wake_id, event, agent)
        elif name == "wake.settled" and owner.wake_id is not None:
            self._open.pop(owner.wake_id, None)
        return owner, led

    def _owner(self, name: str, event: Mapping[str, object], agent: str | None, tier: str | None) -> Owner:
        wake_id = named_wake(event)
        if wake_id is None:
            fence = event.get("fence")
            if agent is not None and isinstance(fence, int):
                wake_id = self._fences.get((agent, fence))
        if wake_id is not None:
            known = self._open.get(wake_id, Owner())
            return Owner(wake_id, agent or known.agent, tier or known.tier)
        if not _is_process_event(name):
            candidates = [o for o in self._open.values() if agent is None or o.agent == agent]
            if len(candidates) == 1:
                return candidates[0]
        return Owner(None, agent, tier)

    def _hold(self, name: str, agent: str | None, tier: str | None, event: Event) -> None:
        if agent is None:
            return
        if name == "lease.acquired":
            self._preludes[("lease", agent)] = _Prelude(self._seq, event, lambda _started: True)
        elif name == "trigger.received":
            self._preludes[("trigger", agent, tier or "")] = _Prelude(
                self._seq, event, lambda started: started.get("tier") == tier and started.get("trigger") == "manual"
            )
        else:  # wake.catch_up: the slot it names is the catch-up wake's scheduled_for
            slot = event.get("slot")
            self._preludes[("catch_up", agent, tier or "")] = _Prelude(
                self._seq, event,
                lambda started: started.get("tier") == tier and started.get("trigger") == "catch_up" and started.get("scheduled_for") == slot,
            )

    def _claim_preludes(self, wake_id: str, started: Mapping[str, object], agent: str | None) -> list[Event]:
        if agent is None:
            return []
        claimed: list[_Prelude] = []
        for key in [k for k in self._preludes if k[1] == agent]:
            prelude = self._preludes[key]
            if key[0] == "lease" or prelude.matches(started):
                claimed.append(self._preludes.pop(key))
        for prelude in claimed:
            fence = prelude.event.get("fence")
            if prelude.event.get("event") == "lease.acquired" and isinstance(fence, int):
                self._remember(self._fences, (agent, fence), wake_id, MAX_OPEN_WAKES)
        return [p.event for p in sorted(claimed, key=lambda p: p.seq)]

    @staticmethod
    def _remember(table: collections.OrderedDict[Any, Any], key: object, value: object, limit: int) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > limit:
            table.popitem(last=False)


# -- filters ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Filters:
    """What to show; an event is shown when it matches every filter given."""

    agent: str | None = None
    tier: str | None = None
    wake: str | None = None  # a wake id or a prefix of one
    events: tuple[str, ...] = ()  # fnmatch globs over the event name; any may match
    level: str | None = None  # the lowest level shown

    def matches(self, event: Mapping[str, object], owner: Owner) -> bool:
        if self.agent is not None and owner.agent != self.agent:
            return False
        if self.tier is not None and owner.tier != self.tier:
            return False
        if self.wake is not None and not (owner.wake_id or "").lower().startswith(self.wake.lower()):
            return False
        if self.events and not any(fnmatch.fnmatchcase(str(event.get("event")), glob) for glob in self.events):
            return False
        return self.level is None or level_rank(event) >= _LEVEL_RANK[self.level.lower()]


@dataclasses.dataclass(kw_only=True)
class Reading:
    """What one pass over the input showed: the events shown and the wakes they belong to."""

    shown: int = 0
    passed_through: int = 0
    wakes: set[str] = dataclasses.field(default_factory=set)


def select(lines: Iterable[str], filters: Filters, reading: Reading | None = None) -> Iterator[str | Event]:
    """The lines to show, in order: a line that is not a JSON event as it is, an event as a dict."""
    story = Story()
    reading = reading if reading is not None else Reading()
    hold_preludes = filters.wake is not None
    for line in lines:
        event = parse(line)
        if event is None:
            reading.passed_through += 1
            yield line
            continue
        owner, led = story.see(event)
        if hold_preludes and Story.is_prelude(event):
            continue  # shown later, before the wake.started it leads to, if that is the wake asked for
        for earlier in led if hold_preludes else ():
            if filters.matches(earlier, owner):
                reading.shown += 1
                yield earlier
        if filters.matches(event, owner):
            reading.shown += 1
            if owner.wake_id is not None:
                reading.wakes.add(owner.wake_id)
            yield event


# -- rendering ----------------------------------------------------------------------------------


def renderer(colors: bool) -> Callable[[Event], str]:
    """structlog's ConsoleRenderer as `wake.logs.configure` sets it up for a terminal."""
    console = structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=structlog.dev.plain_traceback)

    def render(event: Event) -> str:
        return str(console(None, str(event.get("level", "info")), dict(event)))

    return render


def rendered(items: Iterable[str | Event], render: Callable[[Event], str]) -> Iterator[str]:
    for item in items:
        if isinstance(item, str):
            yield item
            continue
        try:
            yield render(item)
        except Exception:  # noqa: BLE001 - a field the renderer cannot take: show the event as it came
            yield json.dumps(item, ensure_ascii=False)


# -- input --------------------------------------------------------------------------------------


def _decoded(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


def stream_lines(stream: IO[bytes]) -> Iterator[str]:
    """Lines of a stream (a pipe: until EOF), each as soon as it is complete."""
    for raw in iter(stream.readline, b""):
        yield _decoded(raw)


def file_lines(path: Path, *, follow: bool, poll_s: float = FOLLOW_POLL_S) -> Iterator[str]:
    """Lines of a file from its beginning. With `follow`, then wait for more, like `tail -F`: a
    file that is truncated is read again from its start, one that is replaced (rotated) is
    reopened by name, and a line is given only once its newline has been written."""
    handle = path.open("rb")
    try:
        identity = _identity(os.fstat(handle.fileno()))
        pending = b""
        while True:
            chunk = handle.readline()
            if chunk:
                pending += chunk
                if pending.endswith(b"\n"):
                    yield _decoded(pending)
                    pending = b""
                continue
            if not follow:
                if pending:
                    yield _decoded(pending)
                return
            try:
                now = os.stat(path)
            except FileNotFoundError:  # rotated away, the new one not there yet
                time.sleep(poll_s)
                continue
            if _identity(now) != identity or now.st_size < handle.tell():
                if pending:
                    yield _decoded(pending)
                    pending = b""
                handle.close()
                handle = path.open("rb")
                identity = _identity(os.fstat(handle.fileno()))
                continue
            time.sleep(poll_s)
    finally:
        handle.close()


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


# -- the command --------------------------------------------------------------------------------


def _colors(choice: str, out: IO[str]) -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    return out.isatty() and not os.environ.get("NO_COLOR")


def show(lines: Iterable[str], filters: Filters, out: IO[str], *, colors: bool, flush_each: bool) -> Reading:
    """Write what `filters` select from `lines` to `out`, rendered; returns what was shown."""
    reading = Reading()
    for text in rendered(select(lines, filters, reading), renderer(colors)):
        out.write(text + "\n")
        if flush_each:
            out.flush()
    out.flush()
    return reading


def _end_note(filters: Filters, reading: Reading) -> tuple[int, str | None]:
    """The exit status and the one stderr line (if any) once the input has ended."""
    if filters.wake is None:
        return 0, None
    if not reading.wakes:
        return EXIT_NOT_FOUND, f"no event of wake {filters.wake!r} in the input"
    if len(reading.wakes) > 1:
        return 0, f"{filters.wake!r} matches {len(reading.wakes)} wakes ({', '.join(sorted(w[:12] for w in reading.wakes))}); all are shown"
    return 0, None


@click.command("logs")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--agent", "agent_id", help="Only events of this agent.")
@click.option("--tier", type=click.Choice(TIERS), help="Only events of wakes of this tier.")
@click.option("--wake", "wake_id", metavar="ID", help="One wake's story, from fire to settle: a wake id or a prefix of one.")
@click.option("--event", "event_globs", multiple=True, metavar="GLOB", help="Only events whose name matches, e.g. 'lease.*' (fnmatch); repeatable.")
@click.option("--level", type=click.Choice(LEVELS, case_sensitive=False), help="Only events at this level or above.")
@click.option("--follow", "-f", is_flag=True, help="After the end of FILE, wait for more lines (tail -F); on a pipe, read until it closes.")
@click.option("--color", "color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the output; auto: when stdout is a terminal and NO_COLOR is unset.")
def logs_command(
    file: Path | None, agent_id: str | None, tier: str | None, wake_id: str | None, event_globs: Sequence[str],
    level: str | None, follow: bool, color: str,
) -> None:
    """Read wake's JSON logs from FILE or stdin and show them as a terminal would, filtered.

    \b
      journalctl -u wake -f -o cat | wake logs --wake 3f2a1b
      wake logs --agent demo --event 'lease.*' --level warning daemon.jsonl

    A line that is not a JSON event passes through unchanged. Exits 0; 1 when --wake matched no
    event by the end of the input; 2 on a usage error; 130 when interrupted.
    """
    if wake_id is not None and not wake_id.strip():
        raise click.UsageError("--wake needs a wake id or a prefix of one")
    filters = Filters(agent=agent_id, tier=tier, wake=wake_id.strip() if wake_id else None, events=tuple(event_globs), level=level)
    out = sys.stdout
    from_stdin = file is None or str(file) == "-"
    stdin = sys.stdin.buffer
    if from_stdin and stdin.isatty():
        raise click.UsageError("give a FILE, or pipe the logs in: journalctl -u wake -o cat | wake logs")
    lines = stream_lines(stdin) if from_stdin else file_lines(Path(str(file)), follow=follow)
    try:
        reading = show(lines, filters, out, colors=_colors(color, out), flush_each=follow or from_stdin)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # `wake logs | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    status, note = _end_note(filters, reading)
    if note is not None:
        click.echo(f"wake: {note}", err=True)
    sys.exit(status)


if __name__ == "__main__":
    logs_command(prog_name="wake logs")
