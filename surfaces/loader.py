"""Builds the registry from its three places: built-ins, operator modules, entry points."""

from __future__ import annotations

from collections.abc import Iterable

from surfaces import builtin, context_tools, epistemic_tools, graph_tools, ledger_tools, memory_tools, names, recall
from surfaces.checked_schemas import CheckedSchemas
from surfaces.registry import Registry


def build(
    modules: Iterable[str] = (), extra_surfaces: Iterable[str] = (), *, entry_points: bool = True, graph: bool = False,
    checked: CheckedSchemas | None = None,
) -> Registry:
    """`graph`: Neo4j is configured, so the graph tools exist (surfaces/graph_tools.py). `checked`: the
    schemas that passed the metaschema check in an earlier process (surfaces/checked_schemas.py)."""
    registry = Registry(names.known_surfaces(set(extra_surfaces)), checked=checked)
    for tool in (
        *builtin.TOOLS, *context_tools.TOOLS, *ledger_tools.TOOLS, *epistemic_tools.TOOLS, *recall.TOOLS, *memory_tools.TOOLS,
        *(graph_tools.TOOLS if graph else ()),
    ):
        registry.register(tool)
    for module in modules:
        registry.load_module(module)
    if entry_points:
        registry.load_entry_points()
    if checked is not None:
        checked.save()
    return registry
