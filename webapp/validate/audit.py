"""Upkeep of the queue's counters: re-derive every Example's decision state after a settings
change, and audit the ``queue_*`` and ``done_count`` counters against the rows they count."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    false,
    func,
    update,
)
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Assignment,
    Batch,
    Example,
    LeaseStatus,
    Vote,
)
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import ADJUDICATION
from webapp.validate.rules import (
    VOTABLE_ORIGINS,
    decision_state,
)

# --- upkeep -----------------------------------------------------------------------------------


def refresh_queue(session: Session, config: StudyConfig, study_id: int = DEFAULT_STUDY_ID) -> int:
    """Recompute every Example's settled/open state of the study under its current settings
    (after an admin changes votes, maximum, threshold or method). Returns how many changed.
    Commits."""
    rows = session.execute(
        sa_select(
            col(Example.id),
            col(Example.queue_agree),
            col(Example.queue_votes),
            col(Example.target_votes),
            col(Example.queue_settled),
            col(Example.queue_open),
        ).where(
            col(Example.origin).in_(VOTABLE_ORIGINS),
            col(Example.study_id) == study_id,
            # An adjudicated Example stays out of the queue whatever the settings say.
            col(Example.id).not_in(sa_select(ADJUDICATION.c.example_id)),
        )
    ).all()
    changed = 0
    for ex_id, agree, votes, target_votes, was_settled, was_open in rows:
        state = decision_state(agree, votes, target_votes or config.votes_per_example, config)
        if state != (was_settled, was_open):
            session.execute(
                update(Example)
                .where(col(Example.id) == ex_id)
                .values(queue_settled=state[0], queue_open=state[1])
            )
            changed += 1
    session.commit()
    return changed


@dataclass(frozen=True)
class QueueMismatch:
    example_id: int
    field: str
    stored: int
    actual: int


def audit_counters(session: Session) -> list[QueueMismatch]:
    """Compare the denormalised queue counters with the Vote and Assignment tables (tests,
    the load benchmark, and an admin's sanity check)."""
    votes = dict(
        session.exec(select(Vote.example_id, func.count()).group_by(col(Vote.example_id))).all()
    )
    agree = dict(
        session.exec(
            select(Vote.example_id, func.count())
            .join(Example, col(Example.id) == col(Vote.example_id))
            .where(col(Vote.value) == col(Example.label))
            .group_by(col(Vote.example_id))
        ).all()
    )
    active = dict(
        session.exec(
            select(Assignment.example_id, func.count())
            .join(Example, col(Example.id) == col(Assignment.example_id))
            .where(Assignment.status == LeaseStatus.active, col(Example.is_gold) == false())
            .group_by(col(Assignment.example_id))
        ).all()
    )
    out = []
    rows = session.execute(
        sa_select(
            col(Example.id),
            col(Example.queue_votes),
            col(Example.queue_agree),
            col(Example.queue_leases),
        ).where(col(Example.origin).in_(VOTABLE_ORIGINS))
    ).all()
    for ex_id, q_votes, q_agree, q_leases in rows:
        for name, stored, actual in (
            ("votes", q_votes, votes.get(ex_id, 0)),
            ("agree", q_agree, agree.get(ex_id, 0)),
            ("leases", q_leases, active.get(ex_id, 0)),
        ):
            if stored != actual:
                out.append(QueueMismatch(int(ex_id), name, int(stored), int(actual)))
    done = dict(
        session.exec(
            select(Assignment.batch_id, func.count())
            .where(Assignment.status == LeaseStatus.done)
            .group_by(col(Assignment.batch_id))
        ).all()
    )
    for batch_id, stored in session.execute(sa_select(col(Batch.id), col(Batch.done_count))):
        if stored != done.get(batch_id, 0):
            out.append(
                QueueMismatch(int(batch_id), "batch_done", int(stored), done.get(batch_id, 0))
            )
    return out
