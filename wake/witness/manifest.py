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

import hashlib
import json
import unicodedata
import weakref
from collections.abc import Mapping
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


def sha256_text(text: str) -> str:
    return hashlib.sha256(unicodedata.normalize("NFC", text).encode("utf-8")).hexdigest()


def sha256_declaration(declaration: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(declaration)).hexdigest()


# Each tool's declaration hash, computed once per Tool (a registry build makes its tools once):
# re-hashing every bound declaration on every wake grows with the registry.
_TOOL_HASHES: dict[int, tuple[weakref.ref[Any], str]] = {}


def tool_hash(tool: Any) -> str:
    """`sha256_declaration(tool.declaration())`, remembered for the life of the Tool object."""
    key = id(tool)
    hit = _TOOL_HASHES.get(key)
    if hit is not None and hit[0]() is tool:
        return hit[1]
    digest = sha256_declaration(tool.declaration())

    def forget(ref: weakref.ref[Any]) -> None:
        if _TOOL_HASHES.get(key, (None, ""))[0] is ref:
            del _TOOL_HASHES[key]

    _TOOL_HASHES[key] = (weakref.ref(tool, forget), digest)
    return digest


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
