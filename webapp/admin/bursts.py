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

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from vsr_core import audit, standing
from vsr_core.audit import Actor
from vsr_core.models import Assignment, AuditKind, Batch, LeaseStatus, RateEvent, Worker
from vsr_core.standing import study_members
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


def recent_bursts(
    session: Session, study_id: int, hours: float = 24.0, min_size: int = MIN_BURST
) -> list[Burst]:
    """The bursts of new identities that took part in the study ``study_id``: identities
    made only in other studies are not this study's to see (their addresses neither)."""
    since = utcnow() - timedelta(hours=hours)
    rows = session.exec(
        select(RateEvent.key, func.count(), func.min(RateEvent.at), func.max(RateEvent.at))
        .join(Worker, col(Worker.id) == RateEvent.worker_id)
        .where(
            RateEvent.kind == NEW_WORKER,
            RateEvent.key != STUDY_KEY,
            col(RateEvent.at) > since,
            made_here(study_id),
        )
        .group_by(RateEvent.key)
        .having(func.count() >= min_size)
        .order_by(func.count().desc())
        .limit(50)
    ).all()
    out = []
    for key, n, first, last in rows:
        ids = _worker_ids(session, key, since, study_id)
        blocked = sum(1 for w in ids if _blocked_here(session, w, study_id))
        leases = (
            int(
                session.exec(
                    select(func.count())
                    .select_from(Assignment)
                    .join(Batch, col(Batch.id) == Assignment.batch_id)
                    .where(
                        col(Assignment.worker_id).in_(ids),
                        Assignment.status == LeaseStatus.active,
                        Batch.study_id == study_id,
                    )
                ).one()
            )
            if ids
            else 0
        )
        out.append(Burst(key, int(n), first, last, blocked, leases))
    return out


def made_here(study_id: int) -> Any:
    """The identity was made entering the study, or has taken part in it since."""
    return or_(col(RateEvent.study_id) == study_id, study_members(study_id))


def _blocked_here(session: Session, worker_id: int, study_id: int) -> bool:
    worker = session.get(Worker, worker_id)
    return worker is not None and standing.standing(session, worker, study_id).blocked


def _worker_ids(session: Session, address: str, since: datetime, study_id: int) -> list[int]:
    """The identities first seen from ``address`` since then that took part in the study."""
    return [
        wid
        for wid in session.exec(
            select(RateEvent.worker_id)
            .join(Worker, col(Worker.id) == RateEvent.worker_id)
            .where(
                RateEvent.kind == NEW_WORKER,
                RateEvent.key == address,
                col(RateEvent.at) > since,
                made_here(study_id),
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
    """Block in the study ``study_id`` every worker first seen from ``address`` in the last
    ``hours`` who took part in it, and return their leased items of the study to the pool;
    returns (workers blocked, leases released). Their work in other studies goes on.

    The audit record names the workers to block; it commits with the first block (each
    block is its own transaction), or alone when there was nothing left to block."""
    ids = sorted(set(_worker_ids(session, address, utcnow() - timedelta(hours=hours), study_id)))
    to_block = [w for w in ids if not _blocked_here(session, w, study_id)]
    audit.record(
        session,
        actor,
        AuditKind.burst_cut,
        study_id=study_id,
        target=address,
        change={"workers": to_block, "hours": hours},
    )
    blocked = released = 0
    for worker_id in to_block:
        worker = session.get(Worker, worker_id)
        if worker is None:
            continue
        released += workers.block_worker(
            session,
            worker,
            strategies,
            f"burst of new identities from {address}",
            study_id=study_id,
        )
        blocked += 1
    session.commit()
    return blocked, released
