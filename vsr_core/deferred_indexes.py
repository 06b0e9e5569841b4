"""Build a table's secondary indexes after a bulk load instead of row by row during it
(PostgreSQL).

Filling an empty table with COPY and then building each index once sorts every key once; with
the indexes in place, every row updates every B-tree and the trigram GIN index on captions
as it arrives, which made a 100x import 7-13x a bare COPY (docs/scaling.md). The indexes are
dropped and created again inside the caller's transaction: DDL is transactional in
PostgreSQL, so a failed load rolls the drop back with the rows and the indexes are never
missing from a committed state. The definitions are read from the catalogue, so an index a
later migration adds is rebuilt as well. The drop takes the table's ACCESS EXCLUSIVE lock
until the transaction ends: meant for a table that is empty when the load starts.

Kept as they are: the primary key and any unique index a foreign key leans on (dropping it
would drop the other table's constraint too).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy.engine import Connection

_SECONDARY = """
SELECT c.relname, pg_get_indexdef(i.indexrelid), con.conname, pg_get_constraintdef(con.oid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
LEFT JOIN pg_constraint con
  ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid AND con.contype IN ('u', 'x')
WHERE i.indrelid = CAST(%(table)s AS regclass)
  AND NOT i.indisprimary
  AND NOT EXISTS (
    SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = i.indexrelid
  )
ORDER BY c.relname
"""


@dataclass(frozen=True)
class SecondaryIndex:
    table: str
    name: str
    index_sql: str  # CREATE [UNIQUE] INDEX ... as the catalogue prints it
    constraint_sql: str | None  # UNIQUE (...) when the index backs a constraint

    def drop_sql(self, conn: Connection) -> str:
        q = conn.dialect.identifier_preparer.quote
        if self.constraint_sql is not None:
            return f"ALTER TABLE {q(self.table)} DROP CONSTRAINT {q(self.name)}"
        return f"DROP INDEX {q(self.name)}"

    def create_sql(self, conn: Connection) -> str:
        q = conn.dialect.identifier_preparer.quote
        if self.constraint_sql is not None:
            return (
                f"ALTER TABLE {q(self.table)} ADD CONSTRAINT {q(self.name)} {self.constraint_sql}"
            )
        return self.index_sql


def secondary_indexes(conn: Connection, table: str) -> list[SecondaryIndex]:
    """The indexes of ``table`` a bulk load may build afterwards, by name."""
    rows = conn.exec_driver_sql(_SECONDARY, {"table": table}).all()
    return [
        SecondaryIndex(table, name, idx, con_def if con else None)
        for name, idx, con, con_def in rows
    ]


def is_empty(conn: Connection, table: str) -> bool:
    q = conn.dialect.identifier_preparer.quote
    return not conn.exec_driver_sql(f"SELECT EXISTS (SELECT 1 FROM {q(table)})").scalar()


@contextmanager
def built_after_load(conn: Connection, tables: list[str]) -> Iterator[list[SecondaryIndex]]:
    """Drop the secondary indexes of ``tables`` now and create them again when the block ends
    normally. If the block raises, nothing is rebuilt: the caller's transaction must roll
    back (which restores them)."""
    indexes = [ix for t in tables for ix in secondary_indexes(conn, t)]
    for ix in indexes:
        conn.exec_driver_sql(ix.drop_sql(conn))
    yield indexes
    for ix in indexes:
        conn.exec_driver_sql(ix.create_sql(conn))
