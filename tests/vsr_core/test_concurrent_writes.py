"""Writes that many requests may make at the same instant: the first save of a study
setting, a label-model fit and an adjudication. Each made its row with a plain INSERT after
finding none, so on PostgreSQL concurrent ones raised UniqueViolation (``studysetting_pkey``,
``labelmodelfit_pkey``: a 500 on the dashboard). Ten threads released at one instant, on
both backends: every call returns, and one row holds the last value. The writes are upserts,
so they hold even with the advisory lock that orders them taken away (``without_locks``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from vsr_core import adjudication, audit, label_fit
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Adjudication,
    AuditEvent,
    Example,
    Image,
    LabelModelDecision,
    LabelModelFit,
    StudySetting,
    Vote,
    Worker,
)
from vsr_core.studies import settings
from vsr_core.studies.settings import load_study_config, save_study_config

THREADS = 10


def _at_once(engine: Engine, work: Callable[[Session, int], None]) -> list[BaseException]:
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        with Session(engine) as session:
            barrier.wait()
            try:
                work(session, i)
            except BaseException as exc:  # collected: the test names every failure
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


def test_concurrent_first_settings_saves_all_succeed(engine: Engine) -> None:
    def save(session: Session, i: int) -> None:
        save_study_config(session, {"validate_batch_size": 10 + i}, DEFAULT_STUDY_ID)

    errors = _at_once(engine, save)
    assert errors == [], [repr(e)[:300] for e in errors]
    with Session(engine) as s:
        rows = s.exec(select(StudySetting).where(StudySetting.key == "validate_batch_size")).all()
        assert len(rows) == 1
        assert 10 <= load_study_config(s, DEFAULT_STUDY_ID).validate_batch_size < 10 + THREADS


def test_concurrent_label_model_fits_all_succeed(engine: Engine) -> None:
    def fit(session: Session, _i: int) -> None:
        label_fit.fit_study(session, DEFAULT_STUDY_ID)

    errors = _at_once(engine, fit)
    assert errors == [], [repr(e)[:300] for e in errors]
    with Session(engine) as s:
        fits = s.exec(select(LabelModelFit)).all()
        assert sorted(f.model for f in fits) == sorted(label_fit.MODELS)


@pytest.fixture
def without_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writers' advisory locks taken away: only the writes themselves keep them apart."""
    for module in (label_fit, settings, adjudication):
        monkeypatch.setattr(module, "hold", lambda _session, _name: None)


def _voted_examples(engine: Engine, examples: int = 4, workers: int = 3) -> list[int]:
    """A few Examples of the default study, each with a vote of every worker."""
    with Session(engine) as s:
        image = Image(coco_id=990001, file_name="x.jpg", coco_split="val2017", width=4, height=3)
        s.add(image)
        s.flush()
        exs = [
            Example(
                study_id=DEFAULT_STUDY_ID,
                image_id=image.id or 0,
                caption=f"The cat is near the dog {n}.",
                relation="near",
                subj="cat",
                obj="dog",
                label=n % 2 == 0,
            )
            for n in range(examples)
        ]
        people = [Worker(source="prolific", external_id=f"racer{n}") for n in range(workers)]
        s.add_all([*exs, *people])
        s.flush()
        for n, ex in enumerate(exs):
            for k, w in enumerate(people):
                s.add(Vote(example_id=ex.id or 0, worker_id=w.id or 0, value=(n + k) % 3 != 0))
        s.commit()
        return [ex.id or 0 for ex in exs]


def test_first_settings_saves_hold_without_the_lock(engine: Engine, without_locks: None) -> None:
    test_concurrent_first_settings_saves_all_succeed(engine)


def test_fits_with_votes_hold_without_the_lock(engine: Engine, without_locks: None) -> None:
    if engine.dialect.name != "postgresql":
        # The lock is PostgreSQL's alone; SQLite writers queue on its one write lock.
        pytest.skip("the advisory lock exists on PostgreSQL only")
    ids = _voted_examples(engine)

    def fit(session: Session, _i: int) -> None:
        label_fit.fit_study(session, DEFAULT_STUDY_ID)

    errors = _at_once(engine, fit)
    assert errors == [], [repr(e)[:300] for e in errors]
    with Session(engine) as s:
        fits = s.exec(select(LabelModelFit)).all()
        assert sorted((f.model, f.examples) for f in fits) == [(m, 4) for m in label_fit.MODELS]
        decided = s.exec(select(LabelModelDecision)).all()
        assert sorted((d.model, d.example_id) for d in decided) == sorted(
            (m, i) for m in label_fit.MODELS for i in ids
        )


@pytest.mark.parametrize("lock", ["with_lock", "without_lock"])
def test_parallel_adjudications_of_one_example_leave_one_settlement(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, lock: str
) -> None:
    if lock == "without_lock":
        monkeypatch.setattr(adjudication, "hold", lambda _session, _name: None)
    (eid, *_) = _voted_examples(engine, examples=1)
    decisions = ["true", "false", "excluded"]

    def settle(session: Session, i: int) -> None:
        adjudication.settle(
            session,
            audit.Actor(name=f"admin{i}"),
            [eid],
            study_id=DEFAULT_STUDY_ID,
            decision=decisions[i % 3],
            reason=f"looked again ({i})",
        )

    errors = _at_once(engine, settle)
    assert errors == [], [repr(e)[:300] for e in errors]
    with Session(engine) as s:
        (row,) = s.exec(select(Adjudication).where(Adjudication.example_id == eid)).all()
        i = int(row.reason.removeprefix("looked again (").removesuffix(")"))
        assert row.decision == decisions[i % 3] and row.admin_name == f"admin{i}"
        if lock == "with_lock":  # taking turns, each record's "before" is what it replaced
            trail = s.exec(
                select(AuditEvent)
                .where(AuditEvent.kind == "adjudicate")
                .order_by(col(AuditEvent.id))
            ).all()
            assert trail and trail[-1].actor == row.admin_name
            assert trail[0].change["before"] is None
            for earlier, later in zip(trail, trail[1:], strict=False):
                assert later.change["before"]["decision"] == earlier.change["after"]["decision"]
