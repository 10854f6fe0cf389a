"""The `memory` and `cloister` arrival blocks, as pure functions of their data: text and counts.

Each block is cut at `max_chars` and says so with the exact total, never the number shown
("showing 40 of 1008"), so a cut block is never read as the whole.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgers import memory_ledger, queries
from memory import provenance
from memory.repo import Entry, LogEntry
from wake import clock

MEMORY_MAX_CHARS = 4000
CLOISTER_MAX_CHARS = 3000
DESCRIPTION_MAX_CHARS = 120
EXCERPT_LINES = 6
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


def recent_lines(recent: Sequence[LogEntry]) -> list[str]:
    """The newest commits, each with where its content came from (`memory.provenance`)."""
    if not recent:
        return []
    lines = ["recent changes, newest first, and where their text came from:"]
    for entry in recent:
        words = entry.summary.split(" ", 2)
        op = words[1] if len(words) > 1 and words[0] == "memory" else "commit"
        wake = entry.trailers.get("Wake-Id", "")
        who = "bootstrap" if wake == "bootstrap" else "operator" if wake == "-" else f"wake {wake[:8]}" if wake else "not the memory tool"
        paths = _clip(", ".join(entry.paths) or "(no file)", DESCRIPTION_MAX_CHARS)
        lines.append(f"- {paths} ({op}, {who}): {_clip(provenance.describe(provenance.of_trailers(entry.trailers)), DESCRIPTION_MAX_CHARS)}")
    return lines


def memory_block(
    entries: Sequence[Entry], *, head: str | None, max_chars: int = MEMORY_MAX_CHARS, recent: Sequence[LogEntry] = (),
) -> Rendered:
    """The file tree with each file's description and size, `system/` first, then the newest
    commits with where their text came from; cut at `max_chars` with a last line naming how many
    files were not shown."""
    total = len(entries)
    size = sum(e.bytes for e in entries)
    ordered = sorted(entries, key=lambda e: _order(e.path))
    lines: list[str] = []
    shown = 0
    used = 0
    opened: list[str] = []
    changes = recent_lines(recent)
    while changes and sum(len(c) + 1 for c in changes) > max_chars // 3:  # the tree keeps most of the room
        changes.pop()
    budget = max_chars - 200 - sum(len(c) + 1 for c in changes)  # room for the header, the "not shown" line and the changes
    for entry in ordered:
        *dirs, name = entry.path.split("/")
        common = 0
        while common < min(len(dirs), len(opened)) and dirs[common] == opened[common]:
            common += 1
        new = [f"{'  ' * depth}{dirs[depth]}/" for depth in range(common, len(dirs))]
        flags = ", read-only" if entry.read_only else ""
        described = _clip(entry.description, DESCRIPTION_MAX_CHARS) or "(no description)"
        line = f"{'  ' * len(dirs)}{name} — {described} ({_size(entry.bytes)}{flags})"
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


def _when(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return f"{clock.stamp(value, 'UTC')} UTC"  # the renderer knows no agent zone: the one format, in UTC, said so
    return str(value)


def cloister_block(
    findings: Sequence[memory_ledger.OpenFinding], *, total: int, counts: Mapping[str, int], max_chars: int = CLOISTER_MAX_CHARS,
) -> Rendered:
    """The open HALT and WARN findings (rows of `ledger.open_findings`, HALT first), each with its
    rule, place and a few lines of its diff; `total` and `counts` are the open numbers, each
    count exact up to `queries.COUNT_CAP` and "more than" that past it."""
    halts, warns = counts.get("HALT", 0), counts.get("WARN", 0)
    if not total:
        return Rendered(text="cloister: no open findings", shown=0, total=0)
    notice = [HALT_NOTICE] if halts else []
    budget = max_chars - 120 - sum(len(n) + 1 for n in notice)
    parts: list[str] = []
    used = shown = 0
    for row in findings:
        where = row.path or "(the whole repository)"
        commit = f" in {row.commit_id[:12]}" if row.commit_id else " (uncommitted)"
        domain = f" {row.domain}" if row.domain else ""
        head = f"{row.severity} #{row.finding_id}{domain} {where}: {row.rule}{commit}, {_when(row.at)}"
        excerpt = [f"    {line}" for line in str(row.excerpt or "").splitlines()[:EXCERPT_LINES]]
        chunk = "\n".join([head, *excerpt])
        if used + len(chunk) + 1 > budget:
            break
        parts.append(chunk)
        used += len(chunk) + 1
        shown += 1
    counted = queries.count_text
    of = f"more than {queries.COUNT_CAP}" if queries.capped(halts) or queries.capped(warns) else str(total)
    header = f"cloister: {counted(halts)} HALT, {counted(warns)} WARN open" + (f" (showing {shown} of {of})" if shown < total else "")
    return Rendered(text="\n".join([header, *parts, *notice]), shown=shown, total=total)
