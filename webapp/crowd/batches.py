"""Batches: one worker's timed session of one kind of work (generate | validate).

Sizes, time limits and the per-day limit come from
``vsr_core.studies.settings.StudyConfig`` using the kind as prefix (``generate_batch_size``,
``validate_minutes``, ...), so a new kind needs no code here. A batch ends when its size is
reached, its deadline passes, or the pool runs dry.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, select

from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Batch,
    BatchKind,
    BatchStatus,
    PlatformStudy,
    Study,
    Worker,
)
from vsr_core.qualification import may_work
from vsr_core.studies.context import parsed_definition
from vsr_core.studies.settings import StudyConfig
from vsr_core.types import utcnow
from webapp.crowd.leases import LeaseStrategy, count_done, lock_row_wait, lock_rows, release_batch

KINDS: tuple[str, ...] = tuple(k.value for k in BatchKind)
DAY = timedelta(hours=24)


class BatchError(Exception):
    """A batch cannot be opened; ``reason`` picks the page the worker sees."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def limits(config: StudyConfig, kind: str) -> tuple[int, int, int]:
    """(size, minutes, batches per rolling 24 h; 0 = unlimited) for a kind."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    return (
        int(getattr(config, f"{kind}_batch_size")),
        int(getattr(config, f"{kind}_minutes")),
        int(getattr(config, f"{kind}_batches_per_day")),
    )


def current_batch(
    session: Session, worker_id: int, kind: str, study_id: int = DEFAULT_STUDY_ID
) -> Batch | None:
    """The worker's newest batch of this kind that is still open."""
    stmt = (
        select(Batch)
        .where(
            Batch.worker_id == worker_id,
            Batch.kind == kind,
            Batch.study_id == study_id,
            Batch.status == BatchStatus.open,
        )
        .order_by(col(Batch.id).desc())
        .limit(1)
    )
    return session.exec(stmt).first()


def latest_batch(
    session: Session, worker_id: int, kind: str, study_id: int = DEFAULT_STUDY_ID
) -> Batch | None:
    stmt = (
        select(Batch)
        .where(Batch.worker_id == worker_id, Batch.kind == kind, Batch.study_id == study_id)
        .order_by(col(Batch.id).desc())
        .limit(1)
    )
    return session.exec(stmt).first()


def latest_completed(
    session: Session, worker_id: int, kind: str, study_id: int = DEFAULT_STUDY_ID
) -> Batch | None:
    """The worker's newest batch of this kind that earned a completion code."""
    stmt = (
        select(Batch)
        .where(
            Batch.worker_id == worker_id,
            Batch.kind == kind,
            Batch.study_id == study_id,
            col(Batch.completion_code).is_not(None),
        )
        .order_by(col(Batch.id).desc())
        .limit(1)
    )
    return session.exec(stmt).first()


def open_or_resume(
    session: Session,
    worker: Worker,
    kind: str,
    config: StudyConfig,
    strategy: LeaseStrategy,
    entry: dict[str, Any] | None = None,
    now: datetime | None = None,
    study_id: int = DEFAULT_STUDY_ID,
    refuse_empty: bool = False,
) -> Batch:
    """Return the worker's open batch of this kind in this study, or open a new one (the
    per-day limit counts the study's batches: a worker may take part in several).

    Raises BatchError("daily_limit") when the per-day limit is used up (``next_batch_at``),
    BatchError("no_work") with ``refuse_empty`` when nothing is there to serve, and
    BatchError("qualification") for a worker the study's check has not admitted to this
    task (docs/studies.md): whatever page or API asks, no batch opens for them. The worker
    row is locked first so two tabs opening at once cannot both create a batch.
    """
    now = now or utcnow()
    assert worker.id is not None
    session.exec(lock_row_wait(select(Worker).where(Worker.id == worker.id), session)).one()
    batch = current_batch(session, worker.id, kind, study_id)
    if batch is not None:
        if expire_if_due(session, batch, config, strategy, now):
            session.flush()
        else:
            return batch
    if not _qualified(session, study_id, worker.id, kind):
        raise BatchError(
            "qualification", "Please pass the short check of this task before a batch."
        )
    size, minutes, _ = limits(config, kind)
    reset = next_batch_at(session, worker.id, kind, config, study_id, now)
    if reset is not None:
        raise BatchError("daily_limit", f"The daily limit of {kind} batches resets at {reset}.")
    batch = Batch(
        study_id=study_id,
        worker_id=worker.id,
        kind=kind,
        status=BatchStatus.open,
        size=size,
        created_at=now,
        deadline=now + timedelta(minutes=minutes),
        entry=dict(entry or {}),
    )
    session.add(batch)
    session.flush()
    # Sized with the new batch in place: what it can hold follows from the worker's batches.
    batch.size = _sized_to_pool(session, strategy, worker.id, size, study_id)
    if batch.size == 0:
        if refuse_empty:
            # No batch at all (the caller rolls back): an empty "Check for more work" leaves
            # no row that reads as a batch someone returned.
            raise BatchError("no_work", "There is no work available right now.")
        batch.size = size  # it ends at once (``give_up``)
    session.add(batch)
    session.flush()
    return batch


def next_batch_at(
    session: Session,
    worker_id: int,
    kind: str,
    config: StudyConfig,
    study_id: int = DEFAULT_STUDY_ID,
    now: datetime | None = None,
) -> datetime | None:
    """When the worker may open their next batch of this kind, if the study's batches per
    rolling 24 h are used up now; None when they may open one now. Batches that ended with
    nothing done (``returned``) do not count."""
    per_day = limits(config, kind)[2]
    if not per_day:
        return None
    now = now or utcnow()
    recent = session.exec(
        select(Batch.created_at)
        .where(
            Batch.worker_id == worker_id,
            Batch.kind == kind,
            Batch.study_id == study_id,
            col(Batch.created_at) >= now - DAY,
            Batch.status != BatchStatus.returned,
        )
        .order_by(col(Batch.created_at).desc())
        .limit(per_day)
    ).all()
    if len(recent) < per_day:
        return None
    # The oldest of the last per_day batches leaves the window first.
    return recent[-1] + DAY


def _qualified(session: Session, study_id: int, worker_id: int, kind: str) -> bool:
    study = session.get(Study, study_id)
    if study is None:
        return True
    definition = parsed_definition(study.definition_hash, study.definition, study.slug)
    return may_work(session, study_id, definition, worker_id, kind)


def _sized_to_pool(
    session: Session, strategy: LeaseStrategy, worker_id: int, size: int, study_id: int
) -> int:
    """The batch's size: the study's, but no more than the items this worker can have in it,
    so the header reads "Pair 1 of 34" when 34 exist, not 200, and the counter can be
    reached; 0 when nothing is available. Strategies without an ``available`` count (tests'
    own) keep the study's size."""
    available = getattr(strategy, "available", None)
    if available is None:
        return size
    count = int(available(session, worker_id, size, study_id))
    return min(size, count)


def expire_if_due(
    session: Session,
    batch: Batch,
    config: StudyConfig,
    strategy: LeaseStrategy,
    now: datetime | None = None,
) -> bool:
    """Close an open batch whose deadline passed; True if it was closed.

    Work done before the deadline is kept and earns the completion code (the time limit is
    the study's, not the worker's fault); a batch with nothing done just expires.
    """
    now = now or utcnow()
    if batch.status != BatchStatus.open or batch.deadline > now:
        return False
    if count_done(session, batch) > 0:
        complete(session, batch, config, strategy, now)
    else:
        release_batch(session, batch, strategy)
        batch.status = BatchStatus.expired
        batch.finished_at = now
        session.add(batch)
    return True


def expire_overdue(
    session: Session,
    kind: str,
    config: StudyConfig,
    strategy: LeaseStrategy,
    now: datetime | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> int:
    """Close every open batch of this kind and study (``config`` is the study's) whose
    deadline passed (workers who never came
    back), so the dashboard's open-batch figures stay true; returns how many.

    Called lazily on lease requests (like ``leases.expire_stale``); rows another
    transaction is closing right now are skipped, not waited for.
    """
    now = now or utcnow()
    stmt = select(Batch).where(
        Batch.kind == kind,
        Batch.study_id == study_id,
        Batch.status == BatchStatus.open,
        col(Batch.deadline) <= now,
    )
    overdue = session.exec(lock_rows(stmt, session)).all()
    for batch in overdue:
        expire_if_due(session, batch, config, strategy, now)
    return len(overdue)


def complete(
    session: Session,
    batch: Batch,
    config: StudyConfig,
    strategy: LeaseStrategy,
    now: datetime | None = None,
) -> Batch:
    """Finish a batch with its platform study's completion code (the study's own when the
    link names none of ours) and hand back any unfinished lease."""
    release_batch(session, batch, strategy)
    batch.status = BatchStatus.completed
    batch.finished_at = now or utcnow()
    batch.completion_code = platform_code(session, batch) or config.completion_code
    session.add(batch)
    return batch


def platform_code(session: Session, batch: Batch) -> str | None:
    """The completion code of the platform study the batch's link named (Prolific
    STUDY_ID): each platform study has its own random code, so a code seen in one study
    opens no other."""
    named = (batch.entry or {}).get("study_id")
    if not named:
        return None
    settings = session.exec(
        select(PlatformStudy.settings).where(
            PlatformStudy.study_id == batch.study_id,
            PlatformStudy.platform == "prolific",
            PlatformStudy.external_id == named,
        )
    ).first()
    code = (settings or {}).get("completion_code")
    return str(code) if code else None


def finish_early(
    session: Session,
    batch: Batch,
    config: StudyConfig,
    strategy: LeaseStrategy,
    now: datetime | None = None,
) -> Batch:
    """The worker ends an open batch before it is used up ("Finish now").

    The work done counts: with at least one item done the batch completes with the study's
    completion code, as when the time runs out (the platform approves the submission; pay
    for a part-batch is the researcher's call, e.g. a pro-rata reward or bonus). With none
    done it is returned, with no code. ``entry["finished_early"]`` marks it either way; the
    dashboard's worker page shows it.
    """
    batch.entry = {**(batch.entry or {}), "finished_early": True}
    if count_done(session, batch) > 0:
        return complete(session, batch, config, strategy, now)
    return give_up(session, batch, strategy)


def give_up(session: Session, batch: Batch, strategy: LeaseStrategy) -> Batch:
    """The pool ran dry before anything was done: the worker should return the study."""
    release_batch(session, batch, strategy)
    batch.status = BatchStatus.returned
    batch.finished_at = utcnow()
    session.add(batch)
    return batch


def seconds_left(batch: Batch, now: datetime | None = None) -> int:
    return max(0, int((batch.deadline - (now or utcnow())).total_seconds()))
