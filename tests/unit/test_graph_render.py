"""The graph block's rendering: both caps hold for any sizes, and the footer says what was cut."""

from __future__ import annotations

import datetime as dt

from ledgers import graph
from untrusted import spotlight as marks
from wake.arrival import graph as graph_block

AT = dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC)


def _view(anchors: int, per_anchor: int, name_len: int) -> graph.View:
    pad = "x" * name_len
    return graph.View(
        anchors=[graph.Anchor(name=f"a{i}{pad}", kind="project", roles=("FACT", "ACTION"), last=AT) for i in range(anchors)],
        edges=[
            graph.Edge(anchor=f"a{i}{pad}", rel="RELATES_TO", outgoing=j % 2 == 0, name=f"n{i}-{j}{pad}", kind="thing")
            for i in range(anchors) for j in range(per_anchor)
        ],
        anchor_total=anchors, neighbour_total=anchors * per_anchor,
    )


def test_caps_hold_for_every_size() -> None:
    for anchors, per_anchor, name_len in ((1, 0, 1), (3, 4, 10), (12, 9, 40), (30, 2, 150)):
        v = _view(anchors, per_anchor, name_len)
        total = anchors * (1 + per_anchor)
        for max_nodes in (1, 2, 5, 20, 500):
            for max_chars in (400, 700, 2000, 100_000):
                text, shown = graph_block.render(v, max_nodes=max_nodes, max_chars=max_chars, timezone="Europe/Stockholm")
                lines = text.splitlines()
                assert len(text) <= max_chars, (anchors, per_anchor, name_len, max_nodes, max_chars)
                assert shown <= max_nodes and shown == len([line for line in lines if line.startswith(("- ", "  "))])
                assert lines[0].endswith(f"; {shown} of {total} entities shown:")
                if shown < total:
                    assert lines[-1].startswith(f"… {total - shown} more entities")
                    assert "cap" in lines[-1]
                else:
                    assert not lines[-1].startswith("…")


def test_links_render_with_type_and_direction_in_the_agents_timezone() -> None:
    v = graph.View(
        anchors=[graph.Anchor(name="Apollo", kind=None, roles=("COMMITMENT",), last=dt.datetime(2026, 11, 29, 23, 30, tzinfo=dt.UTC))],
        edges=[graph.Edge(anchor="Apollo", rel="OWNS", outgoing=False, name="Alice", kind="person")],
        anchor_total=1, neighbour_total=1,
    )
    text, shown = graph_block.render(v, max_nodes=20, max_chars=2000, timezone="Europe/Stockholm")
    assert shown == 2
    d = marks.OPERATOR.span  # names, kinds and link types are stored text: marked data
    assert text.splitlines()[1:] == [f"- {d('Apollo')}: COMMITMENT, last 2026-11-30", f"  <-[{d('OWNS')}]- {d('Alice')} ({d('person')})"]
