"""Leases: one item (an ImagePair for generation, an Example for validation) held by one worker.

The item choice is pluggable: a :class:`LeaseStrategy` says which rows are candidates for a
worker and what happens to an item when it is leased, finished or handed back. The lease
itself (the Assignment row, expiry, resume, concurrency) is the same for every kind.

Concurrency: on PostgreSQL candidates are read with ``SELECT ... FOR UPDATE SKIP LOCKED`` so
two transactions never take the same row and never wait on each other. On SQLite
``vsr_core.db`` starts every transaction with ``BEGIN IMMEDIATE``, which serialises writers for
the whole transaction, so the plain select-then-update below is already exclusive there.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Integer, bindparam, func, insert, update
from sqlmodel import Session, col, select

from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Assignment,
    Batch,
    BatchKind,
    ImagePair,
    LeaseStatus,
    PairStatus,
)
from vsr_core.types import utcnow


class LeaseStrategy(Protocol):
    """How one kind of work picks and tracks its items."""

    kind: str
    item_field: str  # "pair_id" or "example_id" on Assignment

    def candidates(
        self, session: Session, worker_id: int, limit: int, study_id: int = DEFAULT_STUDY_ID
    ) -> Sequence[int]:
        """Ids of items of this study this worker may take next, best first, locked for
        update (never another study's: a batch belongs to one study).

        Use :func:`lock_rows` on the select so PostgreSQL skips rows other transactions
        hold. Return at most ``limit`` ids.
        """
        ...

    def on_leased(self, session: Session, item_id: int) -> None: ...

    def on_returned(self, session: Session, item_id: int) -> None:
        """The lease ended without a result (expired or released): put the item back."""
        ...


def lock_rows(stmt: Any, session: Session) -> Any:
    """Add FOR UPDATE SKIP LOCKED on PostgreSQL; SQLite is serialised by BEGIN IMMEDIATE."""
    bind = session.get_bind()
    if bind.dialect.name == "postgresql":
        return stmt.with_for_update(skip_locked=True)
    return stmt


def lock_row_wait(stmt: Any, session: Session) -> Any:
    """FOR UPDATE (waiting) on PostgreSQL, e.g. to serialise two submits of one assignment."""
    if session.get_bind().dialect.name == "postgresql":
        return stmt.with_for_update()
    return stmt


# --- the generation strategy: available ImagePairs -----------------------------------------


class PairStrategy:
    """Generation: any pair still in the pool, oldest first; one worker per pair."""

    kind: str = BatchKind.generate
    item_field: str = "pair_id"

    def candidates(
        self, session: Session, worker_id: int, limit: int, study_id: int = DEFAULT_STUDY_ID
    ) -> Sequence[int]:
        stmt = (
            select(ImagePair.id)
            .where(ImagePair.status == PairStatus.available, ImagePair.study_id == study_id)
            .order_by(col(ImagePair.id))
            .limit(limit)
        )
        return [i for i in session.exec(lock_rows(stmt, session)) if i is not None]

    def available(
        self, session: Session, worker_id: int, limit: int, study_id: int = DEFAULT_STUDY_ID
    ) -> int:
        """How many pairs (up to ``limit``) are free right now; read without locking."""
        free = (
            select(ImagePair.id)
            .where(ImagePair.status == PairStatus.available, ImagePair.study_id == study_id)
            .limit(limit)
        )
        return int(session.exec(select(func.count()).select_from(free.subquery())).one())

    def on_leased(self, session: Session, item_id: int) -> None:
        pair = session.get(ImagePair, item_id)
        assert pair is not None
        pair.status = PairStatus.leased
        session.add(pair)

    def on_returned(self, session: Session, item_id: int) -> None:
        pair = session.get(ImagePair, item_id)
        if pair is not None and pair.status == PairStatus.leased:
            pair.status = PairStatus.available
            session.add(pair)


# --- the generic lease API ---------------------------------------------------------------


def active_lease(session: Session, batch_id: int | None) -> Assignment | None:
    """The worker's current unfinished lease in this batch (to resume after a reload)."""
    stmt = (
        select(Assignment)
        .where(Assignment.batch_id == batch_id, Assignment.status == LeaseStatus.active)
        .order_by(col(Assignment.id))
        .limit(1)
    )
    return session.exec(stmt).first()


def take_next(
    session: Session,
    batch: Batch,
    strategy: LeaseStrategy,
    lease_minutes: int,
    now: datetime | None = None,
    expire: bool = True,
) -> Assignment | None:
    """Resume the batch's active lease or lease the next free item; None if the pool is empty.

    Flushes but does not commit: the caller commits, so the lease and whatever else the
    request changes land together. ``expire=False`` skips the stale-lease sweep (one query)
    for callers that sweep on their own schedule.
    """
    now = now or utcnow()
    if expire:
        expire_stale(session, strategy, now)
    current = active_lease(session, batch.id)
    if current is not None:
        return current
    assert batch.id is not None
    taken = lease_item(
        session,
        batch.id,
        batch.worker_id,
        batch.deadline,
        strategy,
        lease_minutes,
        now,
        batch.study_id,
    )
    return session.get(Assignment, taken[0]) if taken is not None else None


def lease_expiry(now: datetime, lease_minutes: int, batch_deadline: datetime) -> datetime:
    """A lease runs ``lease_minutes`` but not past the batch's deadline (and at least 30 s)."""
    expires = min(now + timedelta(minutes=lease_minutes), batch_deadline)
    return max(expires, now + timedelta(seconds=30))


def lease_item(
    session: Session,
    batch_id: int,
    worker_id: int,
    batch_deadline: datetime,
    strategy: LeaseStrategy,
    lease_minutes: int,
    now: datetime,
    study_id: int = DEFAULT_STUDY_ID,
) -> tuple[int, int] | None:
    """Lease the strategy's best free item of the batch's study to the worker: (lease id,
    item id), or None.

    Core statements, no ORM objects: this runs on every validation round trip, where
    building and flushing an Assignment object cost more CPU than the INSERT itself.
    """
    for item_id in strategy.candidates(session, worker_id, limit=1, study_id=study_id):
        lease_id = insert_lease(
            session, batch_id, worker_id, batch_deadline, strategy, lease_minutes, now, item_id
        )
        return lease_id, item_id
    return None


def insert_lease(
    session: Session,
    batch_id: int,
    worker_id: int,
    batch_deadline: datetime,
    strategy: LeaseStrategy,
    lease_minutes: int,
    now: datetime,
    item_id: int,
) -> int:
    """Lease this (locked, free) item to the worker; the new lease's id."""
    if session.new or session.dirty or session.deleted:
        session.flush()
    values = {
        "batch_id": batch_id,
        "worker_id": worker_id,
        "kind": strategy.kind,
        "status": LeaseStatus.active.value,
        "leased_at": now,
        "lease_expires_at": lease_expiry(now, lease_minutes, batch_deadline),
        strategy.item_field: item_id,
    }
    lease_id = session.connection().execute(_INSERT_LEASE, values).scalar_one()
    assert lease_id is not None
    strategy.on_leased(session, item_id)
    return lease_id


_INSERT_LEASE = insert(Assignment).returning(col(Assignment.id))


# Finishing a lease is two writes: the lease done, and one more done on its batch
# (``Batch.done_count``, so nobody counts a batch's leases). Core statements, shared with the
# validation queue's hot path, which runs them as plain rows (``q_lease``, ``q_now``,
# ``q_batch``).
FINISH_LEASE = (
    update(Assignment)
    .where(col(Assignment.id) == bindparam("q_lease", type_=Integer))
    .values(status=LeaseStatus.done.value, finished_at=bindparam("q_now"))
)
COUNT_DONE_ON_BATCH = (
    update(Batch)
    .where(col(Batch.id) == bindparam("q_batch", type_=Integer))
    .values(done_count=col(Batch.done_count) + 1)
    .returning(col(Batch.done_count))
)


def finish(session: Session, lease: Assignment, now: datetime | None = None) -> None:
    """Mark a lease done (the strategy's own code records the item's new state)."""
    lease.status = LeaseStatus.done
    lease.finished_at = now or utcnow()
    session.add(lease)
    session.flush()
    session.execute(
        COUNT_DONE_ON_BATCH,
        {"q_batch": lease.batch_id},
        execution_options={"synchronize_session": "fetch"},
    )


def release(session: Session, lease: Assignment, strategy: LeaseStrategy) -> None:
    """Hand an item back to the pool before its lease ran out (e.g. the batch ended)."""
    _end(session, lease, strategy, LeaseStatus.released, utcnow())


def release_batch(session: Session, batch: Batch, strategy: LeaseStrategy) -> int:
    """Release every active lease of a batch; returns how many."""
    leases = session.exec(
        select(Assignment).where(
            Assignment.batch_id == batch.id, Assignment.status == LeaseStatus.active
        )
    ).all()
    for lease in leases:
        release(session, lease, strategy)
    return len(leases)


def expire_stale(session: Session, strategy: LeaseStrategy, now: datetime | None = None) -> int:
    """Expire leases of this kind whose time ran out, putting their items back; returns count.

    Called lazily on every lease request, so no sweeper process is needed; ``vsr serve``
    works the same with one or many processes.
    """
    now = now or utcnow()
    stmt = select(Assignment).where(
        Assignment.kind == strategy.kind,
        Assignment.status == LeaseStatus.active,
        col(Assignment.lease_expires_at) < now,
    )
    stale = session.exec(lock_rows(stmt, session)).all()
    for lease in stale:
        _end(session, lease, strategy, LeaseStatus.expired, now)
    return len(stale)


def _end(
    session: Session, lease: Assignment, strategy: LeaseStrategy, status: str, now: datetime
) -> None:
    lease.status = status
    lease.finished_at = now
    session.add(lease)
    item_id = getattr(lease, strategy.item_field)
    if item_id is not None:
        strategy.on_returned(session, item_id)


def count_done(session: Session, batch: Batch) -> int:
    stmt = select(func.count()).where(
        Assignment.batch_id == batch.id, Assignment.status == LeaseStatus.done
    )
    return int(session.exec(stmt).one())
