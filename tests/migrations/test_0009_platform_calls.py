"""Migration 0009 (platform calls per platform study) on a populated 0008 database, SQLite and
PostgreSQL: calls whose path names a platform study, or a synced submission of one, are traced
to it; the others stay unattributed; every row and value is kept; downgrade drops the column."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import inspect, text

from migrations.runner import downgrade, upgrade
from vsr_core.db import make_engine


@pytest.fixture
def old_url(database_at: Callable[[str], str]) -> str:
    """A fresh database of the current backend, migrated to 0008 only."""
    return database_at("0008")


CALLS = [  # (platform, method, path): what 0008's call log held
    ("prolific", "POST", "/studies/"),  # the create: no id in its path
    ("prolific", "POST", "/studies/st-A/transition/"),
    ("prolific", "GET", "/studies/st-B/submissions/"),
    ("prolific", "POST", "/submissions/sub-1/transition/"),  # sub-1 belongs to st-B
    ("prolific", "POST", "/submissions/bonus-payments/"),
    ("mturk", "update_expiration_for_hit", "update_expiration_for_hit"),
    ("prolific", "POST", "/submissions/unknown/transition/"),
]


def test_calls_are_traced_to_their_platform_study(old_url: str) -> None:
    engine = make_engine(old_url)
    with engine.begin() as c:
        for ext in ("st-A", "st-B"):
            c.execute(
                text(
                    "INSERT INTO platformstudy (platform, external_id, state, settings, "
                    "created_at, study_id) VALUES ('prolific', :e, 'published', '{}', "
                    "CURRENT_TIMESTAMP, 1)"
                ),
                {"e": ext},
            )
        ids: dict[str, int] = {
            str(e): int(i)
            for e, i in c.execute(text("SELECT external_id, id FROM platformstudy")).all()
        }
        c.execute(
            text(
                "INSERT INTO platformsubmission (study_id, platform, external_id, "
                "worker_external_id, status, quality, synced_at) VALUES (:s, 'prolific', "
                "'sub-1', 'p1', 'APPROVED', '{}', CURRENT_TIMESTAMP)"
            ),
            {"s": ids["st-B"]},
        )
        for platform, method, path in CALLS:
            c.execute(
                text(
                    "INSERT INTO platformcall (platform, method, path, error, at) "
                    "VALUES (:p, :m, :path, '', CURRENT_TIMESTAMP)"
                ),
                {"p": platform, "m": method, "path": path},
            )
        before = c.execute(
            text("SELECT id, platform, method, path FROM platformcall ORDER BY id")
        ).all()
    engine.dispose()

    upgrade(old_url)
    engine = make_engine(old_url)
    with engine.connect() as c:
        after = c.execute(
            text(
                "SELECT id, platform, method, path, platform_study_id FROM platformcall ORDER BY id"
            )
        ).all()
    engine.dispose()
    assert [tuple(r[:4]) for r in after] == [tuple(r) for r in before]  # nothing lost
    assert [r[4] for r in after] == [None, ids["st-A"], ids["st-B"], ids["st-B"], None, None, None]

    downgrade(old_url, "0008")
    engine = make_engine(old_url)
    cols = {c["name"] for c in inspect(engine).get_columns("platformcall")}
    with engine.connect() as c:
        again = c.execute(
            text("SELECT id, platform, method, path FROM platformcall ORDER BY id")
        ).all()
    engine.dispose()
    assert "platform_study_id" not in cols and again == before
