"""Bursts of new worker identities from one client address, and cutting them off.

Anyone with a public study link can invent worker ids (a Prolific PID is just a URL
parameter); the rate limits (webapp.http.rate_limits) slow that down, and this shows the admin
where new identities came from in bursts, so they can block the lot and hand their leased
items back to the pool in one step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.models import Assignment, AuditKind, LeaseStatus, RateEvent, Worker
from vsr_core.types import utcnow
from webapp.crowd import workers
from webapp.http.rate_limits import NEW_WORKER, STUDY_KEY

MIN_BURST = 3  # fewer new identities from one address is not worth showing


@dataclass
class Burst:
    address: str
    new_workers: int
    first: datetime
    last: datetime
    blocked: int
    active_leases: int


def recent_bursts(session: Session, hours: float = 24.0, min_size: int = MIN_BURST) -> list[Burst]:
    since = utcnow() - timedelta(hours=hours)
    rows = session.exec(
        select(RateEvent.key, func.count(), func.min(RateEvent.at), func.max(RateEvent.at))
        .where(RateEvent.kind == NEW_WORKER, RateEvent.key != STUDY_KEY, col(RateEvent.at) > since)
        .group_by(RateEvent.key)
        .having(func.count() >= min_size)
        .order_by(func.count().desc())
        .limit(50)
    ).all()
    out = []
    for key, n, first, last in rows:
        ids = _worker_ids(session, key, since)
        blocked = (
            int(
                session.exec(
                    select(func.count()).where(col(Worker.id).in_(ids), col(Worker.blocked))
                ).one()
            )
            if ids
            else 0
        )
        leases = (
            int(
                session.exec(
                    select(func.count()).where(
                        col(Assignment.worker_id).in_(ids), Assignment.status == LeaseStatus.active
                    )
                ).one()
            )
            if ids
            else 0
        )
        out.append(Burst(key, int(n), first, last, blocked, leases))
    return out


def _worker_ids(session: Session, address: str, since: datetime) -> list[int]:
    return [
        wid
        for wid in session.exec(
            select(RateEvent.worker_id).where(
                RateEvent.kind == NEW_WORKER,
                RateEvent.key == address,
                col(RateEvent.at) > since,
                col(RateEvent.worker_id).is_not(None),
            )
        ).all()
        if wid is not None
    ]


def cut_burst(
    session: Session,
    address: str,
    strategies: Mapping[str, Any],
    *,
    actor: Actor,
    study_id: int,
    hours: float = 24.0,
) -> tuple[int, int]:
    """Block every worker first seen from ``address`` in the last ``hours`` and return
    their leased items to the pool; returns (workers blocked, leases released).

    The audit record names the workers to block; it commits with the first block (each
    block is its own transaction), or alone when there was nothing left to block."""
    ids = sorted(set(_worker_ids(session, address, utcnow() - timedelta(hours=hours))))
    to_block = (
        [w.id for w in session.exec(select(Worker).where(col(Worker.id).in_(ids))) if not w.blocked]
        if ids
        else []
    )
    audit.record(
        session,
        actor,
        AuditKind.burst_cut,
        study_id=study_id,
        target=address,
        change={"workers": to_block, "hours": hours},
    )
    blocked = released = 0
    for worker_id in ids:
        worker = session.get(Worker, worker_id)
        if worker is None or worker.blocked:
            continue
        released += workers.block_worker(
            session, worker, strategies, f"burst of new identities from {address}"
        )
        blocked += 1
    session.commit()
    return blocked, released
