"""Secondary indexes dropped for a bulk load and built again after it (PostgreSQL only: SQLite
imports through executemany with its indexes in place)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from vsr_core.db import make_engine
from vsr_core.deferred_indexes import built_after_load, is_empty, secondary_indexes

NAMES = text("SELECT indexname FROM pg_indexes WHERE tablename = 'vote' ORDER BY 1")


def test_indexes_come_back_after_the_block(pg_url: str) -> None:
    engine = make_engine(pg_url)
    with engine.begin() as conn:
        before = list(conn.execute(NAMES).scalars())
        found = {ix.name for ix in secondary_indexes(conn, "vote")}
        # The primary key stays; the unique constraint and plain indexes are rebuilt.
        assert (
            "vote_pkey" not in found and {"uq_vote_example_worker", "ix_vote_example_id"} <= found
        )
        assert is_empty(conn, "vote")
        with built_after_load(conn, ["vote"]):
            assert list(conn.execute(NAMES).scalars()) == ["vote_pkey"]
        assert list(conn.execute(NAMES).scalars()) == before
    engine.dispose()


def test_a_failed_load_rolls_the_drop_back(pg_url: str) -> None:
    engine = make_engine(pg_url)
    with engine.connect() as conn:
        before = list(conn.execute(NAMES).scalars())
    with pytest.raises(RuntimeError), engine.begin() as conn, built_after_load(conn, ["vote"]):
        raise RuntimeError("the load failed")
    with engine.connect() as conn:
        assert list(conn.execute(NAMES).scalars()) == before
    engine.dispose()
