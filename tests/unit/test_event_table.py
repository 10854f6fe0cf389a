"""docs/events.md against the source: every event the code logs is in the table with its level and
every field it passes, and every row of the table is logged somewhere.

The source is read, not run: every module of the packages (found through the import system, so
wherever a module lives inside them), every call `<logger>.info|warning|error|debug|exception|
critical("<dotted.event>", ...)`.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

PACKAGES = ("wake", "surfaces", "ledgers")
DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"
LEVEL_METHODS = {"debug": "debug", "info": "info", "warning": "warning", "error": "error", "exception": "error", "critical": "critical"}
EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
# What a logger is called where it is used: `log.info(...)`, `bound.info(...)`, `self.log.info(...)`.
LOGGER_NAMES = {"log", "logger", "bound"}


@dataclasses.dataclass(frozen=True)
class Emitted:
    event: str
    level: str
    fields: frozenset[str]
    where: str


def source_files() -> Iterator[Path]:
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, package
        for root in spec.submodule_search_locations:
            yield from sorted(Path(root).rglob("*.py"))


def _names(node: ast.expr) -> list[str] | None:
    """The event names a first argument can be: a string, or `"a.b" if ... else "c.d"`; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = _names(node.body), _names(node.orelse)
        return body + orelse if body is not None and orelse is not None else None
    return None


def _is_logger(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in LOGGER_NAMES) or (isinstance(node, ast.Attribute) and node.attr in LOGGER_NAMES)


def emitted() -> tuple[list[Emitted], list[str]]:
    """Every event logged in the packages, and every logger call whose event is not a literal."""
    found: list[Emitted] = []
    unreadable: list[str] = []
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LEVEL_METHODS):
                continue
            where = f"{path}:{node.lineno}"
            names = _names(node.args[0]) if node.args else None
            if names is None:
                if _is_logger(node.func.value) and node.args:
                    unreadable.append(where)
                continue
            fields = frozenset(k.arg for k in node.keywords if k.arg is not None)
            found += [Emitted(n, LEVEL_METHODS[node.func.attr], fields, where) for n in names if EVENT_NAME.match(n)]
    return found, unreadable


@dataclasses.dataclass(frozen=True)
class Row:
    event: str
    levels: frozenset[str]
    fields: frozenset[str]


def documented() -> dict[str, Row]:
    """The rows of every table in docs/events.md whose first cell is an event name in backticks."""
    rows: dict[str, Row] = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not (m := re.fullmatch(r"`([^`]+)`", cells[0])) or not EVENT_NAME.match(m.group(1)):
            continue
        assert m.group(1) not in rows, f"{m.group(1)} has two rows"
        levels = frozenset(level.strip() for level in cells[1].split(","))
        rows[m.group(1)] = Row(m.group(1), levels, frozenset(re.findall(r"`([a-z_]+)`", cells[2])))
    return rows


def test_the_scan_sees_the_events_it_should() -> None:
    found, _ = emitted()
    names = {e.event for e in found}
    # one of each way an event is logged: a module logger, a bound logger, an attribute logger, a conditional name
    assert {"lease.acquired", "wake.started", "tool.call", "gate.quiet", "gate.escalate", "fence.stale"} <= names
    assert len(documented()) > 40


def test_every_event_name_is_a_literal() -> None:
    _, unreadable = emitted()
    assert unreadable == [], "log with a literal event name, so docs/events.md can be checked against it"


def test_every_emitted_event_is_documented_with_its_level_and_fields() -> None:
    found, _ = emitted()
    rows = documented()
    missing = sorted({f"{e.event} ({e.where})" for e in found if e.event not in rows})
    assert missing == [], "add these to docs/events.md"
    wrong_level = sorted(f"{e.event} logs at {e.level} ({e.where}); the table says {', '.join(sorted(rows[e.event].levels))}"
                         for e in found if e.level not in rows[e.event].levels)
    assert wrong_level == []
    undocumented = sorted(
        f"{e.event}: {', '.join(sorted(e.fields - rows[e.event].fields))} ({e.where})" for e in found if e.fields - rows[e.event].fields
    )
    assert undocumented == [], "name these fields in their rows of docs/events.md"


def test_every_documented_event_is_emitted() -> None:
    found, _ = emitted()
    rows = documented()
    names = {e.event for e in found}
    assert sorted(set(rows) - names) == [], "no code logs these any more: remove their rows from docs/events.md"
    levels = {(e.event, e.level) for e in found}
    unused = sorted(f"{event} at {level}" for event, row in rows.items() for level in row.levels if (event, level) not in levels)
    assert unused == [], "no code logs these events at these levels"
