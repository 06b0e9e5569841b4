"""Rate limits kept in the database, so every server process counts the same events.

An event is a row of ``RateEvent`` (kind, key, when): a failed admin login keyed by client
address and username, a new worker identity keyed by client address and by study, a new
batch (the worker's slice of leases) keyed by client address. A limit is "at most N events
of this kind under this key in the last W seconds"; counting uses the (kind, key, at) index.
Old rows are pruned now and then by whoever records an event.

A sliding window over stored events, not a token bucket in memory: with several uvicorn
workers an in-memory count is per process (N processes, N times the limit).
"""

from __future__ import annotations

import random
from datetime import timedelta

from sqlalchemy import delete, func
from sqlmodel import Session, col, select

from core.models import RateEvent
from core.types import utcnow

LOGIN_FAILED = "login_failed"
NEW_WORKER = "new_worker"
NEW_BATCH = "new_batch"
STUDY_KEY = "study"  # the key of site-wide (per-study) counts
KEEP = timedelta(days=2)  # the dashboard shows the last day's bursts


def count(session: Session, kind: str, key: str, window_seconds: float) -> int:
    since = utcnow() - timedelta(seconds=window_seconds)
    stmt = select(func.count()).where(
        RateEvent.kind == kind, RateEvent.key == key, col(RateEvent.at) > since
    )
    return int(session.exec(stmt).one())


def retry_after(session: Session, kind: str, key: str, limit: int, window_seconds: float) -> int:
    """Seconds until one more event of ``kind`` under ``key`` is allowed; 0 when it is now
    (and always when ``limit`` is 0: no limit)."""
    if limit <= 0:
        return 0
    now = utcnow()
    since = now - timedelta(seconds=window_seconds)
    stmt = (
        select(RateEvent.at)
        .where(RateEvent.kind == kind, RateEvent.key == key, col(RateEvent.at) > since)
        .order_by(col(RateEvent.at).desc())
        .offset(limit - 1)
        .limit(1)
    )
    oldest_counted = session.exec(stmt).first()
    if oldest_counted is None:
        return 0
    return max(1, int((oldest_counted - since).total_seconds()) + 1)


def record(session: Session, kind: str, key: str, worker_id: int | None = None) -> None:
    """Add one event (flushed; the caller commits)."""
    session.add(RateEvent(kind=kind, key=key[:200], worker_id=worker_id))
    if random.random() < 0.01:  # prune now and then; the index keeps counting cheap meanwhile
        session.execute(delete(RateEvent).where(col(RateEvent.at) < utcnow() - KEEP))
    session.flush()


def clear(session: Session, kind: str, key: str) -> None:
    session.execute(
        delete(RateEvent).where(col(RateEvent.kind) == kind, col(RateEvent.key) == key)
    )
