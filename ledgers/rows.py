"""Rows as records: a ledger reads a row once, where it runs the SQL, into a frozen dataclass.

A record is a frozen, keyword-only dataclass deriving from `Row`. `from_row` takes each field from
the column of the same name, so the fields are the query's columns, in the query's order (the
order a record's JSON keeps, `fields`). A column the record does not name, or a field without a
default that the row lacks, raises `TypeError` naming them: the SQL and the record cannot drift
apart unnoticed. Fields named in `json_columns` arrive as JSON text and are decoded.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self, TypeVar

import asyncpg

from ledgers import queries


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """The base of every ledger record (see the module docstring)."""

    json_columns: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_row(cls, row: RowLike) -> Self:
        names, required = _names(cls)
        keys = set(row.keys())
        missing, extra = required - keys, keys - set(names)
        if missing or extra:
            raise TypeError(f"{cls.__name__}.from_row: the row lacks {sorted(missing)} and has columns the record does not name: {sorted(extra)}")
        values = {name: row[name] for name in names if name in keys}
        for name in cls.json_columns:
            if isinstance(values.get(name), str):
                values[name] = json.loads(values[name])
        return cls(**values)

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> Self:
        """The record of an anonymous row (`ROW(...)` in a query, a tuple here), whose values are
        the record's fields in order, as a query's columns are."""
        names, _ = _names(cls)
        if len(values) != len(names):
            raise TypeError(f"{cls.__name__}.from_values: {len(values)} values for the fields {list(names)}")
        return cls.from_row(dict(zip(names, values, strict=True)))


R = TypeVar("R", bound=Row)
RowLike = Mapping[str, Any] | asyncpg.Record
_NAMES: dict[type[Row], tuple[tuple[str, ...], frozenset[str]]] = {}


def _names(cls: type[Row]) -> tuple[tuple[str, ...], frozenset[str]]:
    """The record's field names in order, and those without a default (read once per class)."""
    known = _NAMES.get(cls)
    if known is None:
        fields = dataclasses.fields(cls)
        required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        known = _NAMES[cls] = (tuple(f.name for f in fields), required)
    return known


def fields(record: Row) -> list[tuple[str, Any]]:
    """(name, value) of each field in order, values as they are (not copied): how a record is
    written as JSON (`wake.cli.render.to_json`), with the keys its query selected."""
    return [(f.name, getattr(record, f.name)) for f in dataclasses.fields(record)]


def all_of(into: type[R], records: Iterable[RowLike]) -> list[R]:
    """Each row as an `into` record."""
    return [into.from_row(r) for r in records]


def one_of(into: type[R], record: RowLike | None) -> R | None:
    """The row as an `into` record; None when there is no row."""
    return into.from_row(record) if record is not None else None


def counted(into: type[R], records: queries.Records, limit: int, *, total_column: str = "total") -> tuple[list[R], int]:
    """`queries.counted` (rows that carry their total), each row as an `into` record."""
    found, total = queries.counted(records, limit, total_column=total_column)
    return [into.from_row(r) for r in found], total
