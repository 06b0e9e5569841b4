"""A worker's standing when money is about to be sent: the one place that says whether a
worker may still be paid (blocked, flagged). Read in the transaction that claims each
action, so a flag raised after the plan stops the money planned before it."""

from __future__ import annotations

from sqlmodel import Session

from vsr_core.models import Worker


def worker_standing(session: Session, study_id: int, worker_id: int | None) -> str | None:
    """None when the worker may be paid in this study, else the reason they may not.
    ``study_id`` is unused while blocks and flags are global; it is here so per-study
    standing plugs in at this one function."""
    del study_id
    if worker_id is None:
        return None
    worker = session.get(Worker, worker_id)
    if worker is None:
        return None
    if worker.blocked:
        return "worker blocked"
    if worker.flagged:
        reason = f": {worker.flag_reason}" if worker.flag_reason else ""
        return f"worker flagged{reason}"[:200]
    return None
