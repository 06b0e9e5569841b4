"""Gold checks: Examples with a known answer, mixed into validation to measure care.

Admins mark an Example as gold in the dashboard (``webapp.admin.actions.set_gold``); the
validation queue serves gold items at the study's ``gold_rate`` looking exactly like any other
item. Each validator's gold accuracy is
tracked from their votes; once they have answered ``gold_min_answers`` gold items with an
accuracy below ``gold_accuracy_threshold`` they are flagged, and with
``block_on_gold_failure`` also blocked with their open leases handed back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, true
from sqlmodel import Session, col, select

from vsr_core import standing
from vsr_core.models import Example, Vote, Worker
from vsr_core.studies.settings import StudyConfig


@dataclass(frozen=True)
class GoldScore:
    worker_id: int
    answered: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.answered if self.answered else None


def _score_query() -> Any:
    correct = func.sum(case((col(Vote.value) == col(Example.gold_label), 1), else_=0))
    return (
        select(Vote.worker_id, func.count(), correct)
        .join(Example, col(Example.id) == col(Vote.example_id))
        .where(col(Example.is_gold) == true(), col(Example.gold_label).is_not(None))
        .group_by(col(Vote.worker_id))
    )


def gold_score(session: Session, worker_id: int, study_id: int | None = None) -> GoldScore:
    """The worker's gold answers (in one study, when given)."""
    query = _score_query().where(Vote.worker_id == worker_id)
    if study_id is not None:
        query = query.where(Example.study_id == study_id)
    row = session.exec(query).first()
    if row is None:
        return GoldScore(worker_id, 0, 0)
    return GoldScore(worker_id, int(row[1]), int(row[2] or 0))


def gold_report(session: Session) -> list[GoldScore]:
    """Every validator who answered gold items, worst accuracy first (for the dashboard)."""
    scores = [GoldScore(int(w), int(n), int(c or 0)) for w, n, c in session.exec(_score_query())]
    return sorted(scores, key=lambda s: (s.accuracy or 0.0, -s.answered))


def failing(score: GoldScore, config: StudyConfig) -> bool:
    return (
        score.answered >= config.gold_min_answers
        and score.accuracy is not None
        and score.accuracy < config.gold_accuracy_threshold
    )


def check_gold_accuracy(
    session: Session,
    worker: Worker,
    config: StudyConfig,
    strategies: dict[str, Any],
    study_id: int,
) -> bool:
    """Flag (and maybe block) the worker in the study if their gold accuracy there fell below
    the threshold (vsr_core.standing: the flag and block hold in this study only).

    Returns True when this call flagged them. Runs inside the caller's transaction (right
    after a gold vote), so the flag lands with the vote or not at all.
    """
    assert worker.id is not None
    score = gold_score(session, worker.id, study_id)
    now = standing.standing(session, worker, study_id)
    if not failing(score, config) or (now.flagged and not config.block_on_gold_failure):
        return False
    newly = not now.flagged
    reason = (
        f"gold accuracy {score.correct}/{score.answered} = {score.accuracy:.0%} is below "
        f"{config.gold_accuracy_threshold:.0%}"
    )
    standing.set_flagged(session, worker, study_id, True, reason)
    if config.block_on_gold_failure and not now.blocked:
        # The dashboard's own block action: leases back through each kind's strategy, open
        # batches end as returned. It commits, taking this vote and the flag along with it.
        from webapp.crowd.workers import block_worker

        block_worker(session, worker, strategies, reason, study_id=study_id)
        return True
    return newly
