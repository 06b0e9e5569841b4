"""What the database can store, checked before writing: text without NUL characters and
within its column's length, integers within their column's range.

PostgreSQL refuses such values only at INSERT time, with a driver error quoting the SQL;
SQLite stores a NUL or an over-long string and raises OverflowError beyond 64 bits. Code
that writes input from files or people calls :func:`check_row` first and gets one sentence
in plain words naming the record and the field.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Integer, SmallInteger, String, Table

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class LimitError(ValueError):
    """A value the database cannot store; the message is meant for a person."""


def _int_range(column_type: Any) -> tuple[int, int] | None:
    if isinstance(column_type, BigInteger):
        return -INT64_MAX - 1, INT64_MAX
    if isinstance(column_type, SmallInteger):
        return -(2**15), 2**15 - 1
    if isinstance(column_type, Integer):
        return -INT32_MAX - 1, INT32_MAX
    return None


def check_value(what: str, field: str, value: Any, column_type: Any) -> None:
    """Raise :class:`LimitError` if ``value`` cannot be stored in a column of this type."""
    # SQLModel's AutoString (and any TypeDecorator) wraps the real type as ``impl``.
    column_type = getattr(column_type, "impl_instance", None) or column_type
    if isinstance(value, str):
        if "\x00" in value:
            raise LimitError(f"{what}: {field} contains a NUL character (\\0)")
        length = getattr(column_type, "length", None)
        if isinstance(column_type, String) and length is not None and len(value) > length:
            raise LimitError(
                f"{what}: {field} is {len(value)} characters long; at most {length} fit"
            )
    elif isinstance(value, int) and not isinstance(value, bool):
        bounds = _int_range(column_type)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise LimitError(
                f"{what}: {field} = {value} is outside the range the database stores "
                f"({bounds[0]} to {bounds[1]})"
            )


def check_row(table: Table, values: dict[str, Any], what: str) -> None:
    """Check each value of a row for ``table`` (a handle of :mod:`vsr_core.tables`);
    ``what`` names the record in the message, e.g. ``"COCO image 139"``."""
    # A bulk import checks millions of rows: a cheap test per value, and check_value (which
    # words the message) only for a value that fails it.
    limits = _column_limits(table)
    for name, value in values.items():
        limit = limits.get(name)
        if limit is None or value is None:
            continue
        if isinstance(value, str):
            if "\x00" in value or (limit.length is not None and len(value) > limit.length):
                check_value(what, name, value, table.columns[name].type)
        elif (
            isinstance(value, int)
            and not isinstance(value, bool)
            and limit.bounds is not None
            and not limit.bounds[0] <= value <= limit.bounds[1]
        ):
            check_value(what, name, value, table.columns[name].type)


@dataclass(frozen=True)
class _Limit:
    length: int | None  # a String column's length
    bounds: tuple[int, int] | None  # an integer column's range


@functools.cache
def _column_limits(table: Table) -> dict[str, _Limit]:
    out: dict[str, _Limit] = {}
    for column in table.columns:
        column_type = getattr(column.type, "impl_instance", None) or column.type
        length = getattr(column_type, "length", None)
        out[column.name] = _Limit(
            length if isinstance(column_type, String) else None, _int_range(column_type)
        )
    return out
