"""Writes that many requests may make at the same instant: the first save of a study
setting and a label-model fit. Each made its row with a plain INSERT after finding none, so
on PostgreSQL concurrent ones raised UniqueViolation (``studysetting_pkey``,
``labelmodelfit_pkey``: a 500 on the dashboard). Ten threads released at one instant, on
both backends: every call returns, and one row holds the last value."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from vsr_core import label_fit
from vsr_core.models import DEFAULT_STUDY_ID, LabelModelFit, StudySetting
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
