"""A worker's standing in a study: blocked or flagged there, and why (docs/dashboard.md,
"Workers"). The one place it is read and changed; the task pages, the vote's statements, the
gold check, the money code and the dashboard all ask here.

Workers are shared by every study. A block or flag made in a study is a ``WorkerStanding``
row of that study and holds there only; the worker's own ``blocked``/``flagged`` columns are
the standing in every study (a block across every study, a separate act for an admin who
owns every study, and the blocks made before standings were per study).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, exists, or_, true
from sqlmodel import Session

from vsr_core.models import Worker, WorkerStanding
from vsr_core.tables import (
    ANNOTATION,
    BATCH,
    EXAMPLE,
    IMAGE_PAIR,
    INVITE_TOKEN,
    QUALIFICATION_ATTEMPT,
    VOTE,
    WORKER,
    WORKER_STANDING,
)
from vsr_core.types import utcnow

MAX_REASON = 500


@dataclass(frozen=True)
class Standing:
    """What one study sees of a worker: ``blocked``/``flagged`` there (by the study or
    everywhere), the study's own reasons, and whether it is the site-wide block or flag."""

    blocked: bool = False
    flagged: bool = False
    block_reason: str | None = None
    flag_reason: str | None = None
    blocked_everywhere: bool = False
    flagged_everywhere: bool = False

    def as_change(self) -> dict[str, Any]:
        """The study's own part, as an audit record's before/after names it."""
        return {
            "blocked": self.blocked,
            "block_reason": self.block_reason,
            "flagged": self.flagged,
            "flag_reason": self.flag_reason,
        }


def standing(session: Session, worker: Worker, study_id: int) -> Standing:
    """The worker's standing in the study."""
    assert worker.id is not None
    row = session.get(WorkerStanding, (worker.id, study_id))
    return Standing(
        blocked=worker.blocked or bool(row and row.blocked),
        flagged=worker.flagged or bool(row and row.flagged),
        block_reason=row.block_reason if row else None,
        flag_reason=(row.flag_reason if row and row.flagged else None)
        or (worker.flag_reason if worker.flagged else None),
        blocked_everywhere=worker.blocked,
        flagged_everywhere=worker.flagged,
    )


def _row(session: Session, worker_id: int, study_id: int) -> WorkerStanding:
    row = session.get(WorkerStanding, (worker_id, study_id))
    return row or WorkerStanding(worker_id=worker_id, study_id=study_id)


def set_blocked(
    session: Session, worker: Worker, study_id: int, blocked: bool, reason: str | None = None
) -> None:
    """Block (or unblock) the worker in this study only; the caller commits. A block with a
    reason flags them there too, with that reason."""
    assert worker.id is not None
    row = _row(session, worker.id, study_id)
    row.blocked = blocked
    row.block_reason = (reason or "")[:MAX_REASON] or None if blocked else None
    if blocked and reason:
        row.flagged = True
        row.flag_reason = reason[:MAX_REASON]
    row.changed_at = utcnow()
    session.add(row)


def set_flagged(
    session: Session, worker: Worker, study_id: int, flagged: bool, reason: str | None = None
) -> None:
    """Flag (or unflag) the worker in this study only; the caller commits."""
    assert worker.id is not None
    row = _row(session, worker.id, study_id)
    row.flagged = flagged
    row.flag_reason = (reason or "")[:MAX_REASON] or None if flagged else None
    row.changed_at = utcnow()
    session.add(row)


def _clause(column: str, worker_id: Any, study_id: Any, on_worker: Any) -> ColumnElement[bool]:
    everywhere = (
        on_worker == true()
        if on_worker is not None
        else exists().where(WORKER.c.id == worker_id, WORKER.c[column] == true())
    )
    return or_(
        everywhere,
        exists().where(
            WORKER_STANDING.c.worker_id == worker_id,
            WORKER_STANDING.c.study_id == study_id,
            WORKER_STANDING.c[column] == true(),
        ),
    )


def blocked_clause(worker_id: Any, study_id: Any, on_worker: Any = None) -> ColumnElement[bool]:
    """SQL: the worker ``worker_id`` (a column or a bound parameter) is blocked in the study
    ``study_id``: everywhere, or there. ``on_worker``: the worker table's own ``blocked``
    column when the query already reads that row. Primary-key probes, no extra statement."""
    return _clause("blocked", worker_id, study_id, on_worker)


def flagged_clause(worker_id: Any, study_id: Any, on_worker: Any = None) -> ColumnElement[bool]:
    """SQL: the worker is flagged in the study (everywhere, or there); as ``blocked_clause``."""
    return _clause("flagged", worker_id, study_id, on_worker)


def study_members(study_id: int) -> Any:
    """A condition on the worker table: the worker took part in the study (a batch, a
    caption, an Example, a vote, a redeemed invite or a try of its qualification check in
    it; imported authors and validators have no batch). A worker may be a member of several
    studies. Correlated EXISTS probes on the per-worker indexes stop at the first hit, so the
    cost grows with the number of workers, not of votes."""
    w = WORKER.c.id
    # "study_id + 0": SQLite would otherwise walk the whole study by its study_id index for
    # every worker instead of the worker's own rows (on the VSR release: 0.4 ms instead of
    # 32; PostgreSQL 18 ms instead of 45, a UNION of ids 38).
    return or_(
        exists().where(BATCH.c.worker_id == w, BATCH.c.study_id + 0 == study_id),
        exists().where(
            VOTE.c.worker_id == w, EXAMPLE.c.id == VOTE.c.example_id, EXAMPLE.c.study_id == study_id
        ),
        exists().where(EXAMPLE.c.author_id == w, EXAMPLE.c.study_id + 0 == study_id),
        exists().where(
            ANNOTATION.c.worker_id == w,
            IMAGE_PAIR.c.id == ANNOTATION.c.pair_id,
            IMAGE_PAIR.c.study_id == study_id,
        ),
        exists().where(INVITE_TOKEN.c.worker_id == w, INVITE_TOKEN.c.study_id == study_id),
        exists().where(
            QUALIFICATION_ATTEMPT.c.worker_id == w, QUALIFICATION_ATTEMPT.c.study_id == study_id
        ),
    )


def is_member(session: Session, worker_id: int, study_id: int) -> bool:
    """The worker took part in the study (``study_members``)."""
    query = WORKER.select().with_only_columns(WORKER.c.id)
    found = session.connection().execute(
        query.where(WORKER.c.id == worker_id, study_members(study_id))
    )
    return found.first() is not None


def studies_of_worker(session: Session, worker_id: int, among: list[int]) -> list[int]:
    """The studies of ``among`` the worker took part in."""
    return [s for s in among if is_member(session, worker_id, s)]
