"""Posture boundaries: each edge tested one second either side."""

from __future__ import annotations

import pytest

from wake.arrival.posture import posture_for
from wake.config import ContextConfig

DEFAULT = ContextConfig()
CUSTOM = ContextConfig(posture_present_s=60, posture_warm_s=600, posture_cool_s=3600)


@pytest.mark.parametrize(("conf", "edges"), [
    (DEFAULT, [(120, "present", "warm"), (1800, "warm", "cool"), (21600, "cool", "cold")]),
    (CUSTOM, [(60, "present", "warm"), (600, "warm", "cool"), (3600, "cool", "cold")]),
])
def test_each_edge_one_second_either_side(conf: ContextConfig, edges: list[tuple[int, str, str]]) -> None:
    for edge, below, at_or_above in edges:
        assert posture_for(edge - 1, conf) == below
        assert posture_for(edge, conf) == at_or_above
        assert posture_for(edge + 1, conf) == at_or_above


def test_boundaries_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="posture_present_s < posture_warm_s < posture_cool_s"):
        ContextConfig(posture_present_s=600, posture_warm_s=60)
