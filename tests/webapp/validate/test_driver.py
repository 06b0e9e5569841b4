"""The hot path's statements run straight on psycopg's cursor (webapp.validate.driver) give what
SQLAlchemy's ``Connection.execute`` gives: the same rows by name, the same typed values
(UTCDateTime in UTC whatever the connection's time zone), SQLAlchemy's error classes, and a
lost connection invalidated so the API's retry gets a fresh one. PostgreSQL only: on SQLite
the statements go through SQLAlchemy."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC
from typing import Any

import psycopg
import pytest
from sqlalchemy import bindparam, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, NoResultFound
from sqlmodel import Session, col

from tests.webapp.validate.support import make_example, make_image, make_worker
from vsr_core.db import is_dropped_connection, make_engine, make_lean_engine
from vsr_core.models import Assignment, Example
from vsr_core.studies.settings import StudyConfig
from vsr_core.types import utcnow
from webapp.validate import driver
from webapp.validate import queue as vq
from webapp.validate.rules import decision_states, room_params
from webapp.validate.statements import run_prebuilt, statements_for
from webapp.validate.strategy import ExampleStrategy

CONFIG = StudyConfig(gold_rate=0.0, validate_batch_size=50)


@pytest.fixture
def voted(pg_url: str) -> Iterator[tuple[Engine, dict[str, int]]]:
    """A PostgreSQL database where one validator has voted once and holds a second lease."""
    engine = make_engine(pg_url)
    strat = ExampleStrategy(config=CONFIG, rng=random.Random(0))
    with Session(engine) as s:
        image = make_image(s)
        author = make_worker(s, "author", ["generate"])
        for relation in ("left of", "right of", "above", "below"):
            make_example(s, image, author=author, relation=relation)
        worker = make_worker(s, "validator", ["validate"])
        vq.begin_batch(s, worker, strat)
        first = vq.next_item(s, worker, strat)
        assert first is not None and first.lease_id is not None
        vq.record_vote(s, worker, first.lease_id, True, strat, duration_ms=1200)
        second = vq.next_item(s, worker, strat)
        assert second is not None and second.lease_id is not None and worker.id is not None
        assert second.example_id is not None
        batch = s.get(Assignment, second.lease_id)
        assert batch is not None and batch.batch_id is not None
        ids = {
            "worker": worker.id,
            "voted_lease": first.lease_id,
            "open_lease": second.lease_id,
            "example": second.example_id,
            "batch": batch.batch_id,
            "study": 1,
        }
    lean = make_lean_engine(engine, 2)
    yield lean, ids
    lean.dispose()
    engine.dispose()


def _reads(ids: dict[str, int]) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("lock_lease", {"q_lease": ids["voted_lease"]}),
        ("lock_lease", {"q_lease": ids["open_lease"]}),
        ("batch_state", {"q_worker": ids["worker"], "q_study": ids["study"]}),
        (
            "regular",
            {
                "q_worker": ids["worker"],
                "q_limit": 5,
                "q_floor": 0,
                "q_boundary": 1,
                "q_study": ids["study"],
                **room_params(CONFIG),
            },
        ),
        (
            "regular_machines",
            {
                "q_worker": ids["worker"],
                "q_limit": 5,
                "q_floor": 0,
                "q_boundary": 1,
                "q_mix": 1,
                "q_study": ids["study"],
                **room_params(CONFIG),
            },
        ),
        ("gold", {"q_worker": ids["worker"], "q_limit": 5, "q_study": ids["study"]}),
        ("open_floor", {"q_study": ids["study"]}),
        ("late_ok", {"q_id": ids["example"], **room_params(CONFIG)}),
    ]


def _both(engine: Engine, name: str, params: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The statement's rows through SQLAlchemy and straight on the cursor, each in its own
    transaction that is rolled back (some of them lock or write)."""
    stmt = getattr(statements_for("postgresql"), name)
    out = []
    for run in (
        lambda c: c.execute(stmt, params).all(),
        lambda c: list(driver.execute(c, stmt, params).all()),
    ):
        with engine.connect() as conn:
            rows = run(conn)
            out.append([(tuple(r._fields), tuple(r)) for r in rows])
            conn.rollback()
    return out[0], out[1]


def test_every_read_statement_gives_the_same_rows(voted: tuple[Engine, dict[str, int]]) -> None:
    engine, ids = voted
    for name, params in _reads(ids):
        through_sqlalchemy, straight = _both(engine, name, params)
        assert straight == through_sqlalchemy, name
        assert (
            driver.plan_for(
                getattr(statements_for("postgresql"), name), engine.dialect, frozenset(params)
            )
            is not None
        ), name
    # The replayed lease reads its stored vote (a real row, not an empty join).
    _, straight = _both(engine, "lock_lease", {"q_lease": ids["voted_lease"]})
    row = dict(zip(*straight[0], strict=True))
    assert row["vote_id"] is not None and row["value"] is True and row["duration_ms"] == 1200


def test_writing_statements_give_the_same_rows(voted: tuple[Engine, dict[str, int]]) -> None:
    engine, ids = voted
    now = utcnow()
    count = {
        "q_id": ids["example"],
        "q_value": False,
        "q_release": 1,
        **decision_states(StudyConfig()),
    }
    lease = {"q_lease": ids["open_lease"], "q_now": now, "q_batch": ids["batch"]}
    values = {
        "v_example_id": ids["example"],
        "v_worker_id": ids["worker"],
        "v_value": False,
        "v_reference_frame": None,
        "v_duration_ms": 900,
        "v_assignment_id": ids["open_lease"],
        "v_created_at": now,
    }
    through_sqlalchemy, straight = _both(engine, "write_vote", {**count, **values, **lease})
    assert len(straight) == len(through_sqlalchemy) == 1
    # The vote id is the sequence's next value (a rolled-back insert still takes one).
    (names, got), (_, expected) = straight[0], through_sqlalchemy[0]
    row, want = dict(zip(names, got, strict=True)), dict(zip(names, expected, strict=True))
    assert isinstance(row.pop("vote_id"), int) and isinstance(want.pop("vote_id"), int)
    assert row == want and row["queue_votes"] == 1 and row["done_count"] == 2


def test_datetimes_come_back_in_utc_whatever_the_session_time_zone(
    voted: tuple[Engine, dict[str, int]],
) -> None:
    engine, ids = voted
    stmt = statements_for("postgresql").lock_lease
    with engine.connect() as conn:
        conn.exec_driver_sql("SET TIME ZONE 'Asia/Tokyo'")
        row = driver.execute(conn, stmt, {"q_lease": ids["voted_lease"]}).one()
        assert row.created_at.tzinfo is UTC
        assert row.batch_deadline.tzinfo is UTC
        conn.rollback()


def test_the_result_api_the_hot_path_uses(voted: tuple[Engine, dict[str, int]]) -> None:
    engine, ids = voted
    stmt = statements_for("postgresql").lock_lease
    with engine.connect() as conn:
        assert driver.execute(conn, stmt, {"q_lease": 10**9}).first() is None
        assert driver.execute(conn, stmt, {"q_lease": 10**9}).scalar() is None
        with pytest.raises(NoResultFound):
            driver.execute(conn, stmt, {"q_lease": 10**9}).one()
        assert (
            driver.execute(conn, stmt, {"q_lease": ids["open_lease"]}).scalar_one() == ids["worker"]
        )
        conn.rollback()


def test_errors_are_sqlalchemys(voted: tuple[Engine, dict[str, int]]) -> None:
    engine, ids = voted
    stmt = statements_for("postgresql").insert_vote
    values = {
        "example_id": 10**9,
        "worker_id": ids["worker"],
        "value": True,
        "reference_frame": None,
        "duration_ms": None,
        "assignment_id": ids["open_lease"],
        "created_at": utcnow(),
    }
    with Session(engine) as s, pytest.raises(IntegrityError) as caught:
        run_prebuilt(s, stmt, values)
    assert isinstance(caught.value.orig, psycopg.errors.ForeignKeyViolation)
    assert not is_dropped_connection(caught.value)


def test_a_dropped_connection_is_invalidated_and_the_next_one_works(
    voted: tuple[Engine, dict[str, int]], pg_url: str
) -> None:
    engine, ids = voted
    stmt = statements_for("postgresql").lock_lease
    with Session(engine) as s:
        pid = s.connection().connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
        admin = make_engine(pg_url)
        with admin.connect() as c:
            c.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)}, 5000)")
        admin.dispose()
        with pytest.raises(DBAPIError) as caught:
            run_prebuilt(s, stmt, {"q_lease": ids["open_lease"]})
    assert is_dropped_connection(caught.value)
    with Session(engine) as s:  # a fresh connection from the pool
        assert (
            run_prebuilt(s, stmt, {"q_lease": ids["open_lease"]}).one().worker_id == ids["worker"]
        )


def test_statements_it_cannot_run_go_through_sqlalchemy(
    voted: tuple[Engine, dict[str, int]],
) -> None:
    engine, ids = voted
    expanding = select(col(Example.id)).where(col(Example.id).in_(bindparam("ids", expanding=True)))
    assert driver.plan_for(expanding, engine.dialect, frozenset({"ids"})) is None
    with engine.connect() as conn:
        rows = driver.execute(conn, expanding, {"ids": [ids["example"]]}).all()
    assert [r.id for r in rows] == [ids["example"]]


def test_plans_are_kept_once_per_statement_and_no_more_than_the_cap(
    voted: tuple[Engine, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, ids = voted
    stmt = statements_for("postgresql").lock_lease
    keys = frozenset({"q_lease"})
    first = driver.plan_for(stmt, engine.dialect, keys)
    assert first is not None and driver.plan_for(stmt, engine.dialect, keys) is first
    # A statement built anew on every call is planned every time but not kept past the cap.
    monkeypatch.setattr(driver, "MAX_PLANS", len(driver._plans))
    fresh = select(col(Example.id)).where(col(Example.id) == bindparam("q_id"))
    assert driver.plan_for(fresh, engine.dialect, frozenset({"q_id"})) is not None
    assert all(kept is not fresh for kept, _ in driver._plans.values())
    with engine.connect() as conn:
        assert driver.execute(conn, fresh, {"q_id": ids["example"]}).scalar_one() == ids["example"]
