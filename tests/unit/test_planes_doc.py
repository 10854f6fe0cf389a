"""docs/isolation.md's table of planes is `ledgers.scope.PLANES`, row for row (the integration
test of the planes checks the database against the same data)."""

from __future__ import annotations

import re
from pathlib import Path

from ledgers import scope

DOC = Path(__file__).resolve().parents[2] / "docs" / "isolation.md"
ROW = re.compile(r"^\| `([a-z_]+)` \| (data|control|none) \| ([^|]+) \|")


def test_the_documented_planes_are_the_decided_ones() -> None:
    documented = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            grants = () if m[3].strip() == "none" else tuple(g.strip().strip("`") for g in m[3].split(","))
            documented[m[1]] = (m[2], tuple(sorted(grants)))
    assert documented == {t: (p.plane, tuple(sorted(p.grants))) for t, p in scope.PLANES.items()}
