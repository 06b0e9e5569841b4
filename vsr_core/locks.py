"""Making writers that may run at the same instant take turns, inside their transaction.

A write that reads a row, then inserts it when missing (the first save of a study setting, a
label-model fit replacing its cached rows) raced on PostgreSQL: two transactions both found
no row and the second INSERT raised UniqueViolation (a 500). :func:`hold` takes a
transaction-scoped advisory lock on a name, so a second writer of the same name waits for the
first's COMMIT and then sees its rows. SQLite needs nothing: every transaction begins with
BEGIN IMMEDIATE (vsr_core.db) and so already holds the database's only write lock.

The rows themselves are now written by upsert (vsr_core.upsert), which alone prevents the
collision; the lock stays for order (an audit "before" that is the value replaced, a fit's
rows all from one fit).
"""

from __future__ import annotations

import hashlib

from sqlalchemy import text
from sqlmodel import Session


def lock_id(name: str) -> int:
    """The bigint ``pg_advisory_xact_lock`` takes, from a readable name."""
    digest = hashlib.blake2b(f"vsr-lock|{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def hold(session: Session, name: str) -> None:
    """Wait for, then hold until this transaction ends, the lock called ``name``."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_id(name)})
