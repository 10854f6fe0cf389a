"""`queries.together`'s statement: each part a subquery of its own, its parameters numbered on from
the parts' before it, its comment lines (which name its own numbering) left out; a part that uses
a parameter it was not given is refused, rather than read another part's argument."""

from __future__ import annotations

import pytest

from ledgers import queries

FIRST = "-- the agent's ($1) rows, at most $2\nSELECT count(*) AS first_rows FROM t WHERE agent_id = $1 LIMIT $2"
SECOND = "-- the tier's ($2)\nSELECT $1::text AS second_agent, $2::text AS second_tier"


def test_each_parts_parameters_are_numbered_on_from_the_parts_before_it() -> None:
    assert queries._together_sql(((FIRST, 2), (SECOND, 2))) == (
        "SELECT * FROM (\nSELECT count(*) AS first_rows FROM t WHERE agent_id = $1 LIMIT $2\n) AS part1,\n"
        "(\nSELECT $3::text AS second_agent, $4::text AS second_tier\n) AS part2"
    )


def test_a_part_that_uses_a_parameter_it_was_not_given_is_refused() -> None:
    with pytest.raises(ValueError, match="part 2 uses a parameter beyond its 1 arguments"):
        queries._together_sql(((FIRST, 2), (SECOND, 1)))
