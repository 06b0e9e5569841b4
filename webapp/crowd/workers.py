"""Blocking a worker: what happens to their work in flight.

Here, beneath the tasks and the admin, because both block: an admin from the dashboard
(webapp.admin) and the validation task's gold check on its own (webapp.validate.gold).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import true
from sqlmodel import Session, col, select

from vsr_core import standing
from vsr_core.models import (
    Assignment,
    Batch,
    BatchStatus,
    ImagePair,
    LeaseStatus,
    PairStatus,
    Worker,
)
from vsr_core.types import utcnow
from webapp.crowd import leases as lease_mod


def block_worker(
    session: Session,
    worker: Worker,
    strategies: Mapping[str, Any],
    reason: str | None = None,
    *,
    study_id: int | None,
) -> int:
    """Block a worker in one study (``study_id``; None: in every study, the site-wide act) and
    hand their leased items of that study back to the pool; returns leases released. Commits.

    Leases go back through the site's lease strategies (``app.state.strategies``) so each kind
    of work restores its own item state; open batches end as "returned".
    """
    if study_id is None:
        worker.blocked = True
        if reason:
            worker.flagged = True
            worker.flag_reason = reason[:500]
        session.add(worker)
    else:
        standing.set_blocked(session, worker, study_id, True, reason)
    in_study = col(Batch.study_id) == study_id if study_id is not None else true()
    # FOR UPDATE on PostgreSQL (waiting): a submit in flight on one of these leases either
    # finishes first (and the lease is no longer active when re-read) or sees it released.
    stmt = (
        select(Assignment)
        .where(
            Assignment.worker_id == worker.id,
            Assignment.status == LeaseStatus.active,
            col(Assignment.batch_id).in_(select(Batch.id).where(in_study)),
        )
        .order_by(col(Assignment.id))
        .execution_options(populate_existing=True)  # re-read rows this session already holds
    )
    active = session.exec(lease_mod.lock_row_wait(stmt, session)).all()
    for lease in active:
        strategy = strategies.get(lease.kind)
        if strategy is not None:
            lease_mod.release(session, lease, strategy)
        else:
            # No strategy registered for this kind (should not happen): end the lease and
            # put a leased pair back so nothing stays locked to a blocked worker.
            lease.status = LeaseStatus.released
            lease.finished_at = utcnow()
            session.add(lease)
            if lease.pair_id is not None:
                pair = session.get(ImagePair, lease.pair_id)
                if pair is not None and pair.status == PairStatus.leased:
                    pair.status = PairStatus.available
                    session.add(pair)
    now = utcnow()
    for batch in session.exec(
        select(Batch).where(
            Batch.worker_id == worker.id, Batch.status == BatchStatus.open, in_study
        )
    ):
        batch.status = BatchStatus.returned
        batch.finished_at = now
        session.add(batch)
    session.commit()
    return len(active)
