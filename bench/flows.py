"""What the toxic-flow check adds to a wake's binding, next to the binding itself, in the same run.
Prints figures; it is not a timed test.

    python bench/flows.py [--tools 200] [--rounds 2000]

1. `Registry.binding` of a tier over a registry of the built-ins plus N operator tools: the baseline.
2. `surfaces.flow_labels.triangle` over that binding: the pure part of the check (the ledger's part is
   two or three small statements on the wake's connection, measured with the wake in bench/wake.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from surfaces import flow_labels, loader  # noqa: E402
from surfaces.registry import tool  # noqa: E402

_NONE: dict[str, Any] = {"type": "object", "properties": {}}


def _operator_tool(n: int) -> Any:
    label = flow_labels.LABELS[n % 3]

    @tool(name=f"op_{n}", description=f"Operator tool {n}.", parameters=_NONE, surfaces={"wake"}, flows={label})
    async def handler(ctx: Any) -> str:
        return ""

    return handler


def _us(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"p50 {statistics.median(ordered):9.2f} us   p99 {ordered[int(len(ordered) * 0.99)]:9.2f} us   (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    registry = loader.build(entry_points=False)
    for n in range(args.tools):
        registry.register(_operator_tool(n))
    binding_us, triangle_us = [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        bound = registry.binding(["wake.full"])
        binding_us.append((time.perf_counter() - start) * 1e6)
        start = time.perf_counter()
        held = flow_labels.triangle(bound)
        triangle_us.append((time.perf_counter() - start) * 1e6)
    print(f"registry {len(registry)} tools, binding {len(bound)}, flow {held.flow_id}")
    print(f"baseline  Registry.binding   {_us(binding_us)}")
    print(f"added     flows.triangle     {_us(triangle_us)}")


if __name__ == "__main__":
    main()
