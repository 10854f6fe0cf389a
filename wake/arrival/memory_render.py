"""The `memory` and `cloister` arrival blocks, as pure functions of their data: text and counts.

Each block is cut at `max_chars` and says so with the exact total, never the number shown
("showing 40 of 1008"), so a cut block is never read as the whole.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledgers import memory_ledger, queries
from memory import provenance
from memory.repo import Entry, LogEntry
from untrusted import spotlight
from wake import clock

MEMORY_MAX_CHARS = 4000
CLOISTER_MAX_CHARS = 3000
DESCRIPTION_MAX_CHARS = 120
EXCERPT_LINES = 6
EXCERPT_CHARS = 160  # a finding's excerpt line, as marked data (it quotes what it warns about: short)
PATHS_SHOWN = 4      # the paths a recent change names
HALT_NOTICE = (
    "A HALT finding is open: wakes make no model call and bind no writing tool until a human acknowledges "
    "it (`wake memory ack`) or reverts what it points at (`wake memory revert`)."
)


@dataclass(frozen=True, kw_only=True)
class Rendered:
    text: str
    shown: int
    total: int


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _order(path: str) -> tuple[int, str]:
    return (0 if path.startswith("system/") else 1, path)


def recent_lines(recent: Sequence[LogEntry], marks: spotlight.Marks) -> list[str]:
    """The newest commits, each with where its content came from (`memory.provenance`); the paths
    and the trailers' words are stored text (a commit made around the tool writes them): marked data."""
    if not recent:
        return []
    lines = ["recent changes, newest first, and where their text came from:"]
    for entry in recent:
        words = entry.summary.split(" ", 2)
        op = words[1] if len(words) > 1 and words[0] == "memory" else "commit"
        wake = entry.trailers.get("Wake-Id", "")
        who = ("bootstrap" if wake == "bootstrap" else "operator" if wake == "-" else f"wake {spotlight.neutral(wake[:8])}" if wake
               else "not the memory tool")
        paths = ", ".join(marks.span(p, DESCRIPTION_MAX_CHARS) for p in entry.paths[:PATHS_SHOWN]) or "(no file)"
        more = f" and {len(entry.paths) - PATHS_SHOWN} more" if len(entry.paths) > PATHS_SHOWN else ""
        origin = marks.span(provenance.describe(provenance.of_trailers(entry.trailers)), DESCRIPTION_MAX_CHARS)
        lines.append(f"- {paths}{more} ({spotlight.neutral(op)}, {who}): {origin}")
    return lines


def memory_block(
    entries: Sequence[Entry], *, head: str | None, max_chars: int = MEMORY_MAX_CHARS, recent: Sequence[LogEntry] = (),
    marks: spotlight.Marks = spotlight.OPERATOR, quarantined: Mapping[str, str] | None = None,
) -> Rendered:
    """The file tree with each file's description and size, `system/` first, then the newest
    commits with where their text came from; cut at `max_chars` with a last line naming how many
    files were not shown. Each directory's and file's name and each description are stored text:
    marked data. A file with an open injection finding (`quarantined`: path to the finding's kind)
    shows its name and the finding's kind in place of its description."""
    total = len(entries)
    size = sum(e.bytes for e in entries)
    ordered = sorted(entries, key=lambda e: _order(e.path))
    lines: list[str] = []
    shown = 0
    used = 0
    opened: list[str] = []
    changes = recent_lines(recent, marks)
    quarantined = quarantined or {}
    while changes and sum(len(c) + 1 for c in changes) > max_chars // 3:  # the tree keeps most of the room
        changes.pop()
    budget = max_chars - 200 - sum(len(c) + 1 for c in changes)  # room for the header, the "not shown" line and the changes
    for entry in ordered:
        *dirs, name = entry.path.split("/")
        common = 0
        while common < min(len(dirs), len(opened)) and dirs[common] == opened[common]:
            common += 1
        new = [f"{'  ' * depth}{marks.span(dirs[depth], DESCRIPTION_MAX_CHARS)}/" for depth in range(common, len(dirs))]
        flags = ", read-only" if entry.read_only else ""
        if entry.path in quarantined:
            described = spotlight.mark(f"quarantined: open {quarantined[entry.path]} finding; description withheld")
        else:
            described = marks.span(entry.description, DESCRIPTION_MAX_CHARS) if entry.description.strip() else "(no description)"
        line = f"{'  ' * len(dirs)}{marks.span(name, DESCRIPTION_MAX_CHARS)} — {described} ({_size(entry.bytes)}{flags})"
        cost = sum(len(x) + 1 for x in new) + len(line) + 1
        if used + cost > budget:
            break
        lines += [*new, line]
        used += cost
        opened = dirs
        shown += 1
    at = f" at {head[:12]}" if head else ""
    header = f"memory: {total} files, {_size(size)}{at}" + (f" (showing {shown} of {total})" if shown < total else "")
    if shown < total:
        lines.append(f"… {total - shown} more files not shown; `memory ls DIR` lists a directory")
    return Rendered(text="\n".join([header, *lines, *changes]), shown=shown, total=total)


def _when(value: object) -> str:
    if isinstance(value, dt.datetime):
        return f"{clock.stamp(value, 'UTC')} UTC"  # the renderer knows no agent zone: the one format, in UTC, said so
    return str(value)


def cloister_block(
    findings: Sequence[memory_ledger.OpenFinding], *, total: int, counts: Mapping[str, int], max_chars: int = CLOISTER_MAX_CHARS,
    marks: spotlight.Marks = spotlight.OPERATOR,
) -> Rendered:
    """The open findings of every level (rows of `ledger.open_findings`, HALT first, then WARN, then LOG), each with its
    rule, place and a few lines of its diff; `total` and `counts` are the open numbers, each
    count exact up to `queries.COUNT_CAP` and "more than" that past it. The place, the rule's
    words and the excerpt quote stored text: marked data, the excerpt a few short lines of it (a
    finding never hands the model the instruction it warns about as anything but data)."""
    halts, warns, logs = counts.get("HALT", 0), counts.get("WARN", 0), counts.get("LOG", 0)
    if not total:
        return Rendered(text="cloister: no open findings", shown=0, total=0)
    notice = [HALT_NOTICE] if halts else []
    budget = max_chars - 120 - sum(len(n) + 1 for n in notice)
    parts: list[str] = []
    used = shown = 0
    for row in findings:
        where = marks.span(row.path, DESCRIPTION_MAX_CHARS) if row.path else "(the whole repository)"
        commit = f" in {spotlight.neutral(row.commit_id[:12])}" if row.commit_id else " (uncommitted)"
        domain = f" {spotlight.neutral(row.domain)}" if row.domain else ""
        kind = spotlight.mark(f"{row.severity} #{row.finding_id}{domain}")
        head = f"{kind} {where}: {marks.span(row.rule, DESCRIPTION_MAX_CHARS)}{commit}, {_when(row.at)}"
        excerpt = marks.lines(str(row.excerpt or ""), indent="    ", max_lines=EXCERPT_LINES, limit=EXCERPT_CHARS) if row.excerpt else []
        chunk = "\n".join([head, *excerpt])
        if used + len(chunk) + 1 > budget:
            break
        parts.append(chunk)
        used += len(chunk) + 1
        shown += 1
    counted = queries.count_text
    of = f"more than {queries.COUNT_CAP}" if queries.capped(halts) or queries.capped(warns) or queries.capped(logs) else str(total)
    header = (f"cloister: {counted(halts)} HALT, {counted(warns)} WARN, {counted(logs)} LOG open"
              + (f" (showing {shown} of {of})" if shown < total else ""))
    return Rendered(text="\n".join([header, *parts, *notice]), shown=shown, total=total)
