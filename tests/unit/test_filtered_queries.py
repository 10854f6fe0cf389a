"""`queries.filtered`: a query with optional equality filters names only the ones given, each a
parameter numbered on from the query's own, and refuses a name that is not a column's."""

from __future__ import annotations

import pytest

from ledgers import queries

SQL = "SELECT wake_id FROM t WHERE true /* filters */ ORDER BY started_at DESC LIMIT $1"


def test_only_the_filters_given_reach_the_where_numbered_after_the_querys_own() -> None:
    assert queries.filtered(SQL, (), 2) == "SELECT wake_id FROM t WHERE true  ORDER BY started_at DESC LIMIT $1"
    assert queries.filtered(SQL, ("agent_id", "status"), 2) == (
        "SELECT wake_id FROM t WHERE true AND agent_id = $2 AND status = $3 ORDER BY started_at DESC LIMIT $1")


@pytest.mark.parametrize("column", ["agent_id = agent_id OR true", "Tier", "status;", ""])
def test_a_name_that_is_not_a_columns_is_refused(column: str) -> None:
    with pytest.raises(ValueError, match="not a column name"):
        queries.filtered(SQL, (column,), 2)


def test_a_query_without_its_one_mark_is_refused() -> None:
    with pytest.raises(ValueError, match="one /\\* filters \\*/ mark"):
        queries.filtered("SELECT 1", ("agent_id",), 1)
