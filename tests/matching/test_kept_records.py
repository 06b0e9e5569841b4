"""Matching takes the kept Examples by the same definition as every count (vsr_core.kept):
adjudications and a label-model keep rule included, checked against the dashboard's SQL on
real VSR release records (both backends)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from matching.records import kept_true
from matching.store import load_records
from tests.support.admin_seed import read_raw, seed
from vsr_core import adjudication, label_fit
from vsr_core.audit import Actor
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.studies.settings import load_study_config, save_study_config
from webapp.admin.stats.shared import example_agreement


def _dashboard_kept_true(session: Session) -> set[int]:
    cfg = load_study_config(session, DEFAULT_STUDY_ID)
    ea = example_agreement(cfg, study_id=DEFAULT_STUDY_ID)
    rows = session.connection().execute(
        select(ea.c.id).where(ea.c.verdict == "kept", ea.c.final_label.is_(True))
    )
    return {int(i) for (i,) in rows}


def _matching_kept_true(session: Session) -> set[int]:
    cfg = load_study_config(session, DEFAULT_STUDY_ID)
    return {r.id for r in kept_true(load_records(session, DEFAULT_STUDY_ID), cfg.keep_threshold)}


def test_matching_keeps_what_the_dashboard_counts(engine: Engine, vsr_dir: Path) -> None:
    seeded = seed(engine, read_raw(vsr_dir, every=60))
    ids = seeded.example_ids
    with Session(engine) as s:
        plain = _matching_kept_true(s)
        assert plain == _dashboard_kept_true(s)
        true_rejected = next(i for i in ids if i not in plain)
        kept_one = next(iter(sorted(plain)))
        who = Actor("tester", None, via="cli")
        adjudication.settle(
            s, who, [true_rejected], study_id=1, decision="true", reason="checked the photo"
        )
        adjudication.settle(s, who, [kept_one], study_id=1, decision="excluded", reason="dup")
        settled = _matching_kept_true(s)
        assert settled == _dashboard_kept_true(s)
        assert true_rejected in settled and kept_one not in settled
        label_fit.fit_study(s, DEFAULT_STUDY_ID)
        save_study_config(s, {"keep_rule": "mace"}, DEFAULT_STUDY_ID)
        by_model = _matching_kept_true(s)
        assert by_model == _dashboard_kept_true(s)
        assert true_rejected in by_model and kept_one not in by_model
