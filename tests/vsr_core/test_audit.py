"""The audit trail's storage: a record commits with its action, and the database itself
refuses to change or remove one (both backends)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from vsr_core import audit
from vsr_core.models import AuditKind

ALICE = audit.Actor("alice", admin_id=None)


def _one_record(engine: Engine) -> int:
    with Session(engine) as s:
        event = audit.record(
            s,
            ALICE,
            AuditKind.settings_change,
            study_id=1,
            target="settings",
            change=audit.changed({"votes": 3, "same": 1}, {"votes": 5, "same": 1}),
        )
        s.commit()
        assert event.id is not None
        return event.id


def test_a_record_reads_back_with_what_changed(engine: Engine) -> None:
    event_id = _one_record(engine)
    (row,) = list(audit.stream(engine))
    assert row["id"] == event_id
    assert row["actor"] == "alice" and row["kind"] == "settings_change"
    assert row["change"] == {"before": {"votes": 3}, "after": {"votes": 5}}


def test_a_record_rolls_back_with_its_action(engine: Engine) -> None:
    with Session(engine) as s:
        audit.record(s, ALICE, AuditKind.requeue, study_id=1, target="example 1")
        s.rollback()
    assert list(audit.stream(engine)) == []


@pytest.mark.parametrize(
    "statement",
    ["UPDATE auditevent SET actor = 'mallory'", "DELETE FROM auditevent"],
)
def test_the_database_refuses_to_change_a_record(engine: Engine, statement: str) -> None:
    _one_record(engine)
    with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
        conn.execute(text(statement))
    (row,) = list(audit.stream(engine))
    assert row["actor"] == "alice"


def test_postgresql_refuses_truncate(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no TRUNCATE")
    _one_record(engine)
    with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
        conn.execute(text("TRUNCATE auditevent"))
    assert len(list(audit.stream(engine))) == 1
