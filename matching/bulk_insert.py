"""Many rows into one table in the caller's transaction, without an ORM object per row.

PostgreSQL takes them through COPY (ids, when wanted, reserved from the table's sequence
first, in row order, as a multi-row INSERT ... RETURNING would give them); other databases
(SQLite) through one executemany. A run writes tens of thousands of McItems and negatives
at 10x: per-row ORM objects and parameter-heavy INSERTs cost more than the matching did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Table, insert, text
from sqlalchemy.orm import Session

# Rows per executemany call off PostgreSQL: bounded memory for parameter lists.
BATCH = 5_000


def reserve_ids(session: Session, table: Table, n: int) -> list[int]:
    """``n`` fresh ids of ``table`` in increasing order (PostgreSQL: from its sequence)."""
    if n == 0:
        return []
    rows = session.execute(
        text("SELECT nextval(pg_get_serial_sequence(:t, 'id')) FROM generate_series(1, :n)"),
        {"t": table.name, "n": n},
    )
    return sorted(int(r[0]) for r in rows)


def insert_rows(
    session: Session,
    table: Table,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    returning_ids: bool = False,
) -> list[int]:
    """Insert ``rows`` (values in ``columns`` order, JSON columns as Python values) and
    return their ids in row order when ``returning_ids`` (else an empty list). On
    PostgreSQL with ``returning_ids`` the rows must fit in memory (ids are reserved first);
    otherwise they are streamed."""
    json_at = [i for i, c in enumerate(columns) if isinstance(table.c[c].type, JSON)]
    if session.get_bind().dialect.name == "postgresql":
        return _copy(session, table, columns, rows, json_at, returning_ids)
    return _executemany(session, table, columns, rows, returning_ids)


def _copy(
    session: Session,
    table: Table,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    json_at: list[int],
    returning_ids: bool,
) -> list[int]:
    ids: list[int] = []
    cols = list(columns)
    if returning_ids:
        rows = list(rows)
        ids = reserve_ids(session, table, len(rows))
        cols = ["id", *cols]
    raw: Any = session.connection().connection.driver_connection
    quoted = ", ".join(f'"{c}"' for c in cols)
    with raw.cursor() as cur, cur.copy(f'COPY "{table.name}" ({quoted}) FROM STDIN') as copy:
        for n, row in enumerate(rows):
            values = list(row)
            for i in json_at:  # what SQLAlchemy's JSON type writes: json.dumps
                values[i] = None if values[i] is None else json.dumps(values[i])
            copy.write_row([ids[n], *values] if returning_ids else values)
    return ids


def _executemany(
    session: Session,
    table: Table,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    returning_ids: bool,
) -> list[int]:
    ids: list[int] = []
    stmt = insert(table)
    if returning_ids:
        stmt = stmt.returning(table.c.id, sort_by_parameter_order=True)
    batch: list[Mapping[str, Any]] = []

    def flush() -> None:
        if not batch:
            return
        result = session.execute(stmt, batch)
        if returning_ids:
            ids.extend(int(r[0]) for r in result)
        batch.clear()

    for row in rows:
        batch.append(dict(zip(columns, row, strict=True)))
        if len(batch) >= BATCH:
            flush()
    flush()
    return ids
