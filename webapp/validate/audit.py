"""Upkeep of the queue's counters: re-derive every Example's decision state after a settings
change, and audit the ``queue_*`` and ``done_count`` counters against the rows they count."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    case,
    func,
    or_,
    update,
)
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

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
    the load benchmark, and an admin's sanity check).

    The database compares them and returns only the rows that differ: on a database of a
    million Examples, reading every row's counts into Python took gigabytes.
    """
    counted = (
        sa_select(
            col(Vote.example_id).label("example_id"),
            func.count().label("votes"),
            func.sum(case((col(Vote.value) == col(Example.label), 1), else_=0)).label("agree"),
        )
        .join(Example, col(Example.id) == col(Vote.example_id))
        .group_by(col(Vote.example_id))
        .subquery("counted")
    )
    active = (
        sa_select(col(Assignment.example_id).label("example_id"), func.count().label("leases"))
        .where(col(Assignment.status) == LeaseStatus.active.value)
        .group_by(col(Assignment.example_id))
        .subquery("active")
    )
    # Gold Examples' leases are not counted on them (statements.lease_taken).
    actual = {
        "votes": func.coalesce(counted.c.votes, 0),
        "agree": func.coalesce(counted.c.agree, 0),
        "leases": case((col(Example.is_gold), 0), else_=func.coalesce(active.c.leases, 0)),
    }
    stored = {
        "votes": col(Example.queue_votes),
        "agree": col(Example.queue_agree),
        "leases": col(Example.queue_leases),
    }
    rows = session.execute(
        sa_select(
            col(Example.id),
            *(stored[name].label(f"stored_{name}") for name in stored),
            *(actual[name].label(f"actual_{name}") for name in actual),
        )
        .outerjoin(counted, counted.c.example_id == col(Example.id))
        .outerjoin(active, active.c.example_id == col(Example.id))
        .where(
            col(Example.origin).in_(VOTABLE_ORIGINS),
            or_(*(stored[name] != actual[name] for name in stored)),
        )
        .order_by(col(Example.id))
    ).all()
    out = [
        QueueMismatch(int(row.id), name, int(row[f"stored_{name}"]), int(row[f"actual_{name}"]))
        for row in (r._mapping for r in rows)
        for name in stored
        if row[f"stored_{name}"] != row[f"actual_{name}"]
    ]
    done = (
        sa_select(col(Assignment.batch_id).label("batch_id"), func.count().label("done"))
        .where(col(Assignment.status) == LeaseStatus.done.value)
        .group_by(col(Assignment.batch_id))
        .subquery("done")
    )
    actual_done = func.coalesce(done.c.done, 0)
    batches = session.execute(
        sa_select(col(Batch.id), col(Batch.done_count), actual_done)
        .outerjoin(done, done.c.batch_id == col(Batch.id))
        .where(col(Batch.done_count) != actual_done)
        .order_by(col(Batch.id))
    ).all()
    out.extend(
        QueueMismatch(int(batch_id), "batch_done", int(stored_done), int(actual))
        for batch_id, stored_done, actual in batches
    )
    return out
