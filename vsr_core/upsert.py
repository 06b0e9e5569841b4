"""Inserts that two writers may make at once: ``INSERT ... ON CONFLICT DO UPDATE``.

A row made by "read, then insert when missing" raced on PostgreSQL: both writers found none
and the second INSERT raised UniqueViolation (a 500). An upsert settles it in the database:
the later writer waits for the earlier one's row and then updates it, on either backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` into ``table``; a row whose primary key exists replaces that row's
    other columns instead. Every row names the same columns."""
    if not rows:
        return
    keys = [c.name for c in table.primary_key.columns]
    stmt: Any = pg_insert(table) if conn.dialect.name == "postgresql" else sqlite_insert(table)
    update = {name: stmt.excluded[name] for name in rows[0] if name not in keys}
    if update:
        stmt = stmt.on_conflict_do_update(index_elements=keys, set_=update)
    else:
        stmt = stmt.on_conflict_do_nothing(index_elements=keys)
    conn.execute(stmt, list(rows))
