"""A worker's standing when money is about to be sent: the one place that says whether a
worker may still be paid (blocked or flagged in the study, or held for a person's review by
the authenticity evidence). Read in the transaction that claims each action, so a flag raised
after the plan stops the money planned before it."""

from __future__ import annotations

from sqlmodel import Session

from vsr_core import standing
from vsr_core.authenticity_db import held_for_review
from vsr_core.models import Worker


def worker_standing(session: Session, study_id: int, worker_id: int | None) -> str | None:
    """None when the worker may be paid in the site study ``study_id``, else the reason they
    may not (vsr_core.standing: a block or flag there or in every study)."""
    if worker_id is None:
        return None
    worker = session.get(Worker, worker_id)
    if worker is None:
        return None
    found = standing.standing(session, worker, study_id)
    if found.blocked:
        return "worker blocked"
    if found.flagged:
        reason = f": {found.flag_reason}" if found.flag_reason else ""
        return f"worker flagged{reason}"[:200]
    if worker_id in held_for_review(session, study_id, [worker_id]):
        return "worker held for review (authenticity evidence)"
    return None
