"""The SHA-256 manifest of a wake: every block's text, every bound tool's declaration, one root.

Canonical serialization, used for every hash of a structure:

- JSON with keys sorted at every level and compact separators (`,` and `:`), no whitespace;
- non-ASCII characters written as themselves, the whole encoded as UTF-8;
- every string (keys and values) normalized to Unicode NFC first;
- integers as JSON integers; floats are not used in hashed structures.

Hashes:

- a block: SHA-256 of its rendered text (the exact text the model sees), NFC-normalized, UTF-8;
- a tool: SHA-256 of the canonical form of its declaration {name, description, parameters, version};
- the root: SHA-256 of the canonical form of
  {"agent": ..., "tier": ..., "blocks": {name: hash}, "tools": {name: hash}}.

Nothing here depends on Python's hash seed, dict order or the process: two processes with
different PYTHONHASHSEED values compute the same root from the same inputs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import unicodedata
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def _nfc(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, Mapping):
        return {_nfc(str(k)): _nfc(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nfc(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_nfc(v) for v in value)
    if isinstance(value, float):
        raise TypeError("floats are not hashed in a manifest; use integers or strings")
    return value


def canonical(value: Any) -> bytes:
    return json.dumps(_nfc(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@functools.lru_cache(maxsize=256)  # by content: a wake hashes each block's text for its diff, its manifest and its contents
def sha256_text(text: str) -> str:
    return hashlib.sha256(unicodedata.normalize("NFC", text).encode("utf-8")).hexdigest()


def sha256_declaration(declaration: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(declaration)).hexdigest()


# Each tool's declaration hash and canonical text, computed once per Tool (a registry build makes
# its tools once): re-encoding every bound declaration on every wake grows with the registry.
_TOOL_HASHES: dict[int, tuple[weakref.ref[Any], str, str]] = {}


def tool_content(tool: Any) -> tuple[str, str]:
    """(`sha256_declaration(tool.declaration())`, the canonical declaration text), remembered for
    the life of the Tool object."""
    key = id(tool)
    hit = _TOOL_HASHES.get(key)
    if hit is not None and hit[0]() is tool:
        return hit[1], hit[2]
    body = canonical(tool.declaration())
    digest, text = hashlib.sha256(body).hexdigest(), body.decode("utf-8")

    def forget(ref: weakref.ref[Any]) -> None:
        if _TOOL_HASHES.get(key, (None, "", ""))[0] is ref:
            del _TOOL_HASHES[key]

    _TOOL_HASHES[key] = (weakref.ref(tool, forget), digest, text)
    return digest, text


def tool_hash(tool: Any) -> str:
    """`sha256_declaration(tool.declaration())`, remembered for the life of the Tool object."""
    return tool_content(tool)[0]


def root_hash(agent_id: str, tier: str, blocks: Mapping[str, str], tools: Mapping[str, str]) -> str:
    return hashlib.sha256(canonical({"agent": agent_id, "tier": tier, "blocks": dict(blocks), "tools": dict(tools)})).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Manifest:
    agent_id: str
    tier: str
    blocks: dict[str, str]
    tools: dict[str, str]
    root: str

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent_id, "tier": self.tier, "root": self.root, "blocks": self.blocks, "tools": self.tools}


def build(agent_id: str, tier: str, block_texts: Mapping[str, str], declarations: Mapping[str, Mapping[str, Any]]) -> Manifest:
    blocks = {name: sha256_text(text) for name, text in block_texts.items()}
    tools = {name: sha256_declaration(decl) for name, decl in declarations.items()}
    return of_hashes(agent_id, tier, blocks, tools)


def of_hashes(agent_id: str, tier: str, blocks: Mapping[str, str], tools: Mapping[str, str]) -> Manifest:
    """The manifest of block and tool hashes already computed (the cycle hashes tools at bind time)."""
    return Manifest(agent_id=agent_id, tier=tier, blocks=dict(blocks), tools=dict(tools), root=root_hash(agent_id, tier, blocks, tools))


def contents(block_texts: Mapping[str, str], declarations: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """What the hashes stand for, keyed by them: {sha256: ("block", text) or ("tool", canonical
    declaration)}. Stored once per distinct content (`manifest_contents`), so `verify` can
    recompute every hash of a row from the content itself."""
    out = {sha256_text(text): ("block", text) for text in block_texts.values()}
    out.update({sha256_declaration(decl): ("tool", canonical(decl).decode("utf-8")) for decl in declarations.values()})
    return out


def contents_of(block_texts: Mapping[str, str], tools: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """`contents` for bound Tool objects, their declarations encoded once per Tool (`tool_content`)."""
    out = {sha256_text(text): ("block", text) for text in block_texts.values()}
    for tool in tools:
        digest, text = tool_content(tool)
        out[digest] = ("tool", text)
    return out


@dataclass(frozen=True)
class Difference:
    """One part of a stored row that its stored content does not give back."""

    part: str  # "block <name>", "tool <name>", "tool list", "root"
    detail: str


def _content_problem(kind: str, stored_hash: str, body: tuple[str, str] | None) -> str | None:
    if body is None:
        return f"no stored {kind} has the row's hash {stored_hash}: the hash was changed, or its content removed"
    if body[0] != kind:
        return f"the row's hash {stored_hash} names a stored {body[0]}, not a {kind}"
    again = sha256_text(body[1]) if kind == "block" else sha256_declaration(json.loads(body[1]))
    if again != stored_hash:
        return f"its stored content hashes to {again}, the row says {stored_hash}: the content was changed"
    return None


def audit(
    agent_id: str, tier: str, blocks: Mapping[str, str], tools: Mapping[str, str], root: str, tool_names: Sequence[str],
    stored: Mapping[str, tuple[str, str]] | None,
) -> tuple[str, list[Difference]]:
    """Recompute a stored row: every block and tool hash from its stored content, the root from
    the hashes, the tool list from the tools. Returns the recomputed root and every part that
    differs. `stored=None`: a row recorded before content was stored; only the root and the tool
    list are checked."""
    found: list[Difference] = []
    if stored is not None:
        found += _contents_differ(blocks, tools, stored)
    if sorted(tools) != list(tool_names):
        listed, hashed = ", ".join(tool_names) or "none", ", ".join(sorted(tools)) or "none"
        found.append(Difference("tool list", f"the row lists {listed}; its tool hashes name {hashed}"))
    again = root_hash(agent_id, tier, blocks, tools)
    if again != root:
        found.append(Difference("root", f"the row's root is {root}; its block and tool hashes give {again}"))
    return again, found


@dataclass(frozen=True)
class Verification:
    """`wake verify` of one stored row (and the console's wake page): the recomputed root and every
    part that differs. `legacy`: recorded before block texts and tools were stored, so only the
    root is recomputed, from the row's hashes."""

    recomputed: str
    differences: list[Difference]
    legacy: bool


def verify_row(row: Mapping[str, Any], stored: Mapping[str, tuple[str, str]]) -> Verification:
    """Recompute a ledger row that has a manifest from the content stored for its hashes."""
    legacy = row["chain_seq"] is None and not row["arrival_order"]
    recomputed, differences = audit(
        row["agent_id"], row["tier"], {n: b["hash"] for n, b in row["blocks"].items()}, row["tool_hashes"], row["manifest_root"],
        list(row["active_tool_names"]), None if legacy else stored,
    )
    if row["active_tools_count"] != len(row["tool_hashes"]):
        counted = f"the row counts {row['active_tools_count']}; it has {len(row['tool_hashes'])} tool hashes"
        differences.append(Difference("tool count", counted))
    return Verification(recomputed=recomputed, differences=differences, legacy=legacy)


def stored_hashes(row: Mapping[str, Any]) -> list[str]:
    """The content hashes a row's verification reads: each block's, then each tool's."""
    return [b["hash"] for b in row["blocks"].values()] + list(row["tool_hashes"].values())


def _contents_differ(blocks: Mapping[str, str], tools: Mapping[str, str], stored: Mapping[str, tuple[str, str]]) -> list[Difference]:
    found: list[Difference] = []
    for name, digest in sorted(blocks.items()):
        problem = _content_problem("block", digest, stored.get(digest))
        if problem:
            found.append(Difference(f"block {name}", problem))
    for name, digest in sorted(tools.items()):
        problem = _content_problem("tool", digest, stored.get(digest))
        declared = json.loads(stored[digest][1]).get("name") if problem is None else name
        if problem is None and declared != name:
            problem = f"its stored declaration is of the tool {declared!r}"
        if problem:
            found.append(Difference(f"tool {name}", problem))
    return found
