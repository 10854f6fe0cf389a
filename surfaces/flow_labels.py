"""Flow labels: what a tool lets into a wake, what it reads, what it sends out (docs/tools.md, "Flow labels").

Three labels, carried by every tool as `Tool.flows`:

- `untrusted_input`: it returns text an outsider wrote (a web page, an inbox, an MCP server's free text);
- `private_data`: it reads what should stay the agent's (its memory, its ledger, a repository, credentials);
- `egress`: it sends data out of wake (a channel, a webhook, a tool that posts).

A binding that holds all three (across its tools) is a toxic flow: the first can steer the model
to carry the second out through the third (`wake.witness.flows`). Built-ins are labelled here;
an MCP tool's defaults come from its annotations (`from_annotations`); the operator's globs
(`[tools] flows`, `[tools.mcp.<server>] flows`) replace a tool's labels.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgers import tool_flows

UNTRUSTED_INPUT = "untrusted_input"
PRIVATE_DATA = "private_data"
EGRESS = "egress"
LABELS: tuple[str, ...] = (UNTRUSTED_INPUT, PRIVATE_DATA, EGRESS)

# The built-in tools' labels, by name (a built-in not named here carries none). They read the
# agent's own records and memory; none fetches from outside or sends out.
BUILTIN: Mapping[str, frozenset[str]] = {
    "wake_history": frozenset({PRIVATE_DATA}),
    "wake_manifest": frozenset({PRIVATE_DATA}),
    "archive_search": frozenset({PRIVATE_DATA}),
    "recall": frozenset({PRIVATE_DATA}),
    "memory": frozenset({PRIVATE_DATA}),
    "memory_read": frozenset({PRIVATE_DATA}),
    "graph_neighbors": frozenset({PRIVATE_DATA}),
    "claim_probe": frozenset({PRIVATE_DATA}),  # reads the files under the probe roots
}


def from_annotations(annotations: Mapping[str, object]) -> frozenset[str]:
    """An MCP tool's default labels from its annotations, read as the MCP specification defines
    them (`openWorldHint` absent means true, `readOnlyHint` absent means false): a tool that reaches
    an open world brings its text in (`untrusted_input`) and, unless it is read-only, can send to
    it (`egress`). A closed-world tool gets neither. No annotation says a tool reads private data:
    that is the operator's to say."""
    open_world = annotations.get("openWorldHint") is not False
    read_only = annotations.get("readOnlyHint") is True
    labels = set()
    if open_world:
        labels.add(UNTRUSTED_INPUT)
        if not read_only:
            labels.add(EGRESS)
    return frozenset(labels)


def overridden(name: str, defaults: frozenset[str], rules: Sequence[tuple[str, Iterable[str]]]) -> frozenset[str]:
    """The labels of the last glob matching `name` (its labels replace the defaults), else the defaults."""
    found = [frozenset(labels) for pattern, labels in rules if fnmatch.fnmatchcase(name, pattern)]
    return found[-1] if found else defaults


def shown(labels: Iterable[str]) -> str:
    """Labels in their fixed order, for a listing: `untrusted_input, egress`, or `-`."""
    present = set(labels)
    return ", ".join(label for label in LABELS if label in present) or "-"


def triangle(tools: Iterable[Any]) -> tool_flows.Held:
    """The toxic flow a binding holds: the tools of each leg, when every leg has one (else no flow).
    Its id is the first 12 hex digits of the SHA-256 over the three sorted legs, so a tool joining
    or leaving a leg makes a new flow (one an operator has not accepted)."""
    held = list(tools)
    untrusted, private, egress = (tuple(sorted(t.name for t in held if label in t.flows)) for label in LABELS)
    if not (untrusted and private and egress):
        return tool_flows.Held(flow_id=None)
    digest = hashlib.sha256(json.dumps([untrusted, private, egress]).encode("utf-8")).hexdigest()[:12]
    return tool_flows.Held(flow_id=digest, untrusted=untrusted, private=private, egress=egress)


def legs_text(held: tool_flows.Held) -> str:
    """`untrusted input a; private data b; egress c`."""
    return "; ".join(f"{leg} {', '.join(names)}" for leg, names in tool_flows.legs(held))
