"""`mcp_tool_pins` and `mcp_tool_findings`: the first declaration seen of every MCP server tool,
and what a different one raised (docs/tools.md, "Pins").

A pin is keyed by (server, tool), the server's own name for the tool; the hash is of the
canonical declaration the manifest hashes. `vet` compares what a wake is about to bind with the
pins: an unseen tool is pinned as first seen, a tool whose hash differs raises a finding (once per
declaration seen while it is open), and the policy decides whether it is bound."""

from __future__ import annotations

import datetime as dt
import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from ledgers import queries, rows

_sql = queries.named("tool_pins")

POLICIES = ("strict", "warn", "off")


@dataclass(frozen=True, kw_only=True)
class Seen:
    """One MCP tool as a wake sees it: who serves it, its names, hash and canonical declaration."""

    server: str
    tool: str
    name: str
    hash: str
    declaration: Mapping[str, Any]
    policy: str


@dataclass(frozen=True, kw_only=True)
class Verdict:
    name: str
    server: str
    tool: str
    pin: str  # pinned (matches) | first_seen (pinned now) | changed (differs from its pin) | unpinned (policy off)
    bind: bool
    finding_id: int | None = None  # the open finding of a changed declaration
    new_finding: bool = False


@dataclass(frozen=True, kw_only=True)
class Pin(rows.Row):
    """A row of `mcp_tool_pins`: the declaration a tool is pinned to."""

    json_columns = ("declaration",)

    server: str
    tool: str
    name: str
    hash: str
    declaration: dict[str, Any]
    pinned_at: dt.datetime
    pinned_by: str


@dataclass(frozen=True, kw_only=True)
class OpenFinding(rows.Row):
    """An open row of `mcp_tool_findings`, without the two declarations (its `diff` has them)."""

    id: int
    server: str
    tool: str
    name: str
    policy: str
    pinned_hash: str
    seen_hash: str
    diff: str
    raised_at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Finding(rows.Row):
    """A row of `mcp_tool_findings` as `wake tools findings` lists it."""

    json_columns = ("pinned_declaration", "seen_declaration")

    id: int
    server: str
    tool: str
    name: str
    policy: str
    pinned_hash: str
    seen_hash: str
    pinned_declaration: dict[str, object]
    seen_declaration: dict[str, object]
    diff: str
    raised_at: dt.datetime
    state: str
    accepted_by: str | None
    accepted_at: dt.datetime | None


@dataclass(frozen=True, kw_only=True)
class Accepted(rows.Row):
    """A finding just accepted: its hashes and diff, and how many pins moved (1, or 0 when the pin
    is gone) and how many other open findings of the tool it superseded."""

    id: int
    pinned_hash: str
    seen_hash: str
    diff: str
    repinned: int
    superseded: int


def declaration_diff(old: Mapping[str, object], new: Mapping[str, object]) -> str:
    """A unified diff of two declarations, each as indented JSON with sorted keys."""
    a = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "pinned", "seen", lineterm=""))


async def pins_of(conn: asyncpg.Connection, servers: Sequence[str]) -> dict[tuple[str, str], Pin]:
    """The pins of these servers' tools, by (server, tool)."""
    return {(p.server, p.tool): p for p in rows.all_of(Pin, await conn.fetch(_sql("pins_of"), list(servers)))}


async def vet(conn: asyncpg.Connection, seen: Sequence[Seen], at: dt.datetime, *, record: bool = True) -> list[Verdict]:
    """Pin what is new, raise a finding for what changed, and say which tools may be bound.
    `record=False` writes nothing (a dry run): the verdicts are the same, with no finding id."""
    if not seen:
        return []
    pins = await pins_of(conn, sorted({s.server for s in seen}))
    out = []
    for s in seen:
        if s.policy == "off":
            out.append(Verdict(name=s.name, server=s.server, tool=s.tool, pin="unpinned", bind=True))
            continue
        pin = pins.get((s.server, s.tool))
        if pin is None:
            if record:
                    await conn.execute(_sql("pin_first"), s.server, s.tool, s.name, s.hash, json.dumps(s.declaration), at)
            out.append(Verdict(name=s.name, server=s.server, tool=s.tool, pin="first_seen", bind=True))
        elif pin.hash == s.hash:
            out.append(Verdict(name=s.name, server=s.server, tool=s.tool, pin="pinned", bind=True))
        elif record:
            out.append(await _changed(conn, s, pin, at))
        else:
            out.append(Verdict(name=s.name, server=s.server, tool=s.tool, pin="changed", bind=s.policy == "warn"))
    return out


async def _changed(conn: asyncpg.Connection, s: Seen, pin: Pin, at: dt.datetime) -> Verdict:
    raised = await conn.fetchval(
        _sql("raise_finding"), s.server, s.tool, s.name, s.policy, pin.hash, s.hash, json.dumps(pin.declaration),
        json.dumps(s.declaration), declaration_diff(pin.declaration, s.declaration), at,
    )
    finding = raised
    if finding is None:
        finding = next((f.id for f in await open_findings(conn, [s.server]) if f.tool == s.tool and f.seen_hash == s.hash), None)
    return Verdict(
        name=s.name, server=s.server, tool=s.tool, pin="changed", bind=s.policy == "warn", finding_id=finding, new_finding=raised is not None,
    )


async def open_findings(conn: asyncpg.Connection, servers: Sequence[str] | None = None) -> list[OpenFinding]:
    return rows.all_of(OpenFinding, await conn.fetch(_sql("open_findings"), list(servers) if servers is not None else None))


async def findings(conn: asyncpg.Connection, *, include_closed: bool, limit: int) -> list[Finding]:
    return rows.all_of(Finding, await conn.fetch(_sql("findings"), include_closed, limit))


async def accept(conn: asyncpg.Connection, server: str, tool: str, *, by: str, at: dt.datetime) -> Accepted | None:
    """Accept the tool's newest open finding: its declaration becomes the pin. None: no open finding."""
    return rows.one_of(Accepted, await conn.fetchrow(_sql("accept"), server, tool, by, at))
