"""Migration 0011 on a populated 0010 database, SQLite and PostgreSQL: the platform-study
column of submissions and actions is renamed platform_study_id with every value kept, the
ledger table refuses a unit twice, and downgrade restores the old names."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from migrations.runner import downgrade, upgrade
from vsr_core.db import make_engine


@pytest.fixture
def old_url(database_at: Callable[[str], str]) -> str:
    return database_at("0010")


def test_names_fixed_and_the_ledger_unique(old_url: str) -> None:
    engine = make_engine(old_url)
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO platformstudy (platform, external_id, state, settings, "
                "created_at, study_id) VALUES ('prolific', 'st', 'published', '{}', "
                "CURRENT_TIMESTAMP, 1)"
            )
        )
        ps = int(c.execute(text("SELECT id FROM platformstudy")).scalar_one())
        c.execute(
            text(
                "INSERT INTO platformsubmission (study_id, platform, external_id, "
                "worker_external_id, status, quality, synced_at) VALUES (:s, "
                "'prolific', 'sub-1', 'p1', 'APPROVED', '{}', CURRENT_TIMESTAMP)"
            ),
            {"s": ps},
        )
        c.execute(
            text(
                "INSERT INTO platformaction (study_id, platform, kind, target, reason, "
                "idempotency_key, state, created_at) VALUES (:s, 'prolific', 'approve', "
                "'sub-1', '', 'k1', 'done', CURRENT_TIMESTAMP)"
            ),
            {"s": ps},
        )
        c.execute(
            text(
                "INSERT INTO worker (source, external_id, roles, blocked, flagged, "
                "created_at) VALUES ('prolific', 'p1', '[]', false, false, "
                "CURRENT_TIMESTAMP)"
            )
        )
        c.execute(
            text(
                "INSERT INTO batch (study_id, worker_id, kind, status, size, created_at, "
                "deadline, entry, done_count) SELECT 1, id, 'generate', 'completed', 1, "
                "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '{}', 1 FROM worker"
            )
        )
    engine.dispose()

    upgrade(old_url)
    engine = make_engine(old_url)
    with engine.begin() as c:
        assert c.execute(text("SELECT platform_study_id FROM platformsubmission")).all() == [(ps,)]
        assert c.execute(
            text("SELECT platform_study_id, idempotency_key FROM platformaction")
        ).all() == [(ps, "k1")]
        sub = c.execute(text("SELECT id FROM platformsubmission")).scalar_one()
        batch = c.execute(text("SELECT id FROM batch")).scalar_one()
        row = (
            "INSERT INTO platformledger (unit_kind, unit_id, platform_study_id, "
            "submission_id, batch_id, kept, cents, created_at) VALUES ('example', 7, :ps, "
            ":sub, :b, true, 50, CURRENT_TIMESTAMP)"
        )
        c.execute(text(row), {"ps": ps, "sub": sub, "b": batch})
    with pytest.raises(IntegrityError), engine.begin() as c:
        c.execute(text(row), {"ps": ps, "sub": sub, "b": batch})
    engine.dispose()

    downgrade(old_url, "0010")
    engine = make_engine(old_url)
    cols = {c["name"] for c in inspect(engine).get_columns("platformaction")}
    with engine.connect() as c:
        again = c.execute(text("SELECT study_id FROM platformsubmission")).all()
    tables = inspect(engine).get_table_names()
    engine.dispose()
    assert "study_id" in cols and "platform_study_id" not in cols and again == [(ps,)]
    assert "platformledger" not in tables
