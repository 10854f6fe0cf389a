"""The capability map: registry size against bound hands, per tier and per surface, inert
declarations, each tool's flow labels and each tier's toxic flow (surfaces/flow_labels.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from surfaces import flow_labels, names
from surfaces.registry import Registry, surface_meets

BUILTIN = "builtin"  # `Tool.origin` of the tools wake ships


@dataclass(frozen=True, kw_only=True)
class CapabilityMap:
    tools: list[dict[str, Any]]
    tiers: dict[str, dict[str, Any]]
    surfaces: dict[str, int]
    registry_size: int
    inert: list[str]
    unbound_builtins: list[str]  # built-in tools no configured tier binds: the config's choice, not a fault

    def as_dict(self) -> dict[str, Any]:
        return {
            "registry_size": self.registry_size, "tiers": self.tiers, "surfaces": self.surfaces, "tools": self.tools, "inert": self.inert,
            "unbound_builtins": self.unbound_builtins,
        }


def _unmet(registry: Registry, tier_binds: Mapping[str, Sequence[str]]) -> list[tuple[str, str, str]]:
    """(tool, its origin, a wake surface of it that no tier binds)."""
    all_binds = {b for binds in tier_binds.values() for b in binds}
    return [
        (t.name, t.origin, s) for t in registry for s in sorted(t.surfaces)
        if s not in names.NON_WAKE_SURFACES and not any(surface_meets(b, s) for b in all_binds)
    ]


def _inert(registry: Registry, tier_binds: Mapping[str, Sequence[str]]) -> list[str]:
    """Declarations nothing meets: a surface of an operator's tool (a module, an entry point) that
    no tier binds, a tier bind no tool declares. A built-in tool the tiers leave unbound is the
    config's choice (`unbound_builtins`), not a fault."""
    inert = [f"tool {name} declares surface {s!r}, which no tier binds" for name, origin, s in _unmet(registry, tier_binds) if origin != BUILTIN]
    for label, binds in tier_binds.items():
        for b in binds:
            if not any(surface_meets(b, s) for t in registry for s in t.surfaces):
                inert.append(f"tier {label} binds surface {b!r}, which no tool declares")
    return inert


def build(registry: Registry, tier_binds: Mapping[str, Sequence[str]]) -> CapabilityMap:
    """`tier_binds` maps a tier label (`agent.tier`) to its binds."""
    bound_by: dict[str, list[str]] = {t.name: [] for t in registry}
    tiers: dict[str, dict[str, object]] = {}
    for label, binds in tier_binds.items():
        binding = registry.binding(binds)
        for t in binding:
            bound_by[t.name].append(label)
        held = flow_labels.triangle(binding)
        toxic = None if held.flow_id is None else {"id": held.flow_id, "untrusted_input": list(held.untrusted), "private_data": list(held.private),
                                                   "egress": list(held.egress)}
        tiers[label] = {"binds": list(binds), "bound": len(binding), "tools": [t.name for t in binding], "toxic_flow": toxic}
    surfaces: dict[str, int] = {}
    for t in registry:
        for s in t.surfaces:
            surfaces[s] = surfaces.get(s, 0) + 1
    inert = _inert(registry, tier_binds)
    unbound = sorted({name for name, origin, _ in _unmet(registry, tier_binds) if origin == BUILTIN} - {n for n, by in bound_by.items() if by})
    tools = [
        {"name": t.name, "surfaces": sorted(t.surfaces), "mutates": t.mutates, "version": t.version, "origin": t.origin, "bound_by": bound_by[t.name],
         "requires_approval": t.requires_approval, "flows": [label for label in flow_labels.LABELS if label in t.flows]}
        for t in registry
    ]
    return CapabilityMap(tools=tools, tiers=tiers, surfaces=dict(sorted(surfaces.items())), registry_size=len(registry), inert=inert,
                         unbound_builtins=unbound)


