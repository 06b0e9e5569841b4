"""Write many new rows into one table inside the caller's transaction: PostgreSQL's COPY
(its bulk path: one statement streams every row), SQLite's executemany.

On PostgreSQL the ids come from the table's own sequence before the COPY (``nextval`` once per
row, so concurrent writers never collide), which tells the caller each new row's id without
reading the rows back. SQLite has no sequence to draw from; there the caller looks the ids up.
The rollback of the caller's transaction removes everything, COPY included.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import IO, Any

from sqlalchemy import Table, insert, text
from sqlalchemy.engine import Connection, Engine

EXECUTEMANY_BATCH = 5000  # rows per executemany call on SQLite (bounded memory)


def uses_copy(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def uses_copy_engine(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def allocate_ids(conn: Connection, table: Table, n: int) -> list[int]:
    """``n`` new ids for ``table`` from its serial sequence, in increasing order (PostgreSQL)."""
    if n == 0:
        return []
    seq = conn.execute(
        text("SELECT pg_get_serial_sequence(:table, 'id')"), {"table": table.name}
    ).scalar_one()
    ids = conn.execute(
        text("SELECT nextval(CAST(:seq AS regclass)) FROM generate_series(1, :n)"),
        {"seq": seq, "n": n},
    ).scalars()
    return sorted(ids)


def insert_rows(
    conn: Connection, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """Insert ``rows`` (tuples in ``columns`` order) and return how many were written."""
    if uses_copy(conn):
        return _copy_rows(conn, table, columns, rows)
    n = 0
    it: Iterator[Sequence[Any]] = iter(rows)
    while batch := [dict(zip(columns, row, strict=True)) for row in islice(it, EXECUTEMANY_BATCH)]:
        conn.execute(insert(table), batch)
        n += len(batch)
    return n


def _copy_rows(
    conn: Connection, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    for name in columns:
        table.columns[name]  # a KeyError here, not a server error quoting the statement
    quoted = conn.dialect.identifier_preparer
    statement = "COPY {} ({}) FROM STDIN".format(
        quoted.format_table(table), ", ".join(quoted.quote(c) for c in columns)
    )
    n = 0
    # The DB-API connection of this very Connection: the COPY is part of its transaction.
    with conn.connection.driver_connection.cursor() as cur, cur.copy(statement) as copy:  # type: ignore[union-attr]
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


# COPY's text format: one line per row, tab between columns, \N for NULL, and a backslash
# before the four characters that would otherwise end a field or a row.
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text_line(values: Sequence[Any]) -> str:
    """One row in COPY's text format (str, int, bool, None, datetime)."""
    out = []
    for v in values:
        if v is None:
            out.append("\\N")
        elif v is True:
            out.append("t")
        elif v is False:
            out.append("f")
        elif isinstance(v, str):
            out.append(v.translate(_COPY_ESCAPES))
        elif isinstance(v, int):
            out.append(str(v))
        else:  # datetime: ISO 8601 with its offset, which PostgreSQL reads as it is
            out.append(v.isoformat())
    return "\t".join(out) + "\n"


def copy_from_file(
    conn: Connection, table: Table, columns: Sequence[str], fh: IO[bytes], block: int = 1 << 20
) -> None:
    """``COPY table (columns) FROM STDIN`` of a file of :func:`copy_text_line` rows (UTF-8),
    read in blocks: the rows are never all in memory. PostgreSQL only."""
    for name in columns:
        table.columns[name]
    quoted = conn.dialect.identifier_preparer
    statement = "COPY {} ({}) FROM STDIN".format(
        quoted.format_table(table), ", ".join(quoted.quote(c) for c in columns)
    )
    with conn.connection.driver_connection.cursor() as cur, cur.copy(statement) as copy:  # type: ignore[union-attr]
        while data := fh.read(block):
            copy.write(data)
