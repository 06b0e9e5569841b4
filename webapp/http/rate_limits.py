"""Rate limits kept in the database, so every server process counts the same events.

An event is a row of ``RateEvent`` (kind, key, when): a failed admin login keyed by client
address and username, a new worker identity keyed by client address and by study, a new
batch (the worker's slice of leases) keyed by client address. A limit is "at most N events
of this kind under this key in the last W seconds"; counting uses the (kind, key, at) index.
Old rows are pruned now and then by whoever records an event.

A sliding window over stored events, not a token bucket in memory: with several uvicorn
workers an in-memory count is per process (N processes, N times the limit).

Counting and recording must be one atomic step, or concurrent requests all count the same
N - 1 events and all record one more (on PostgreSQL 8 processes x 50 threads got 83 password
checks past a limit of 5). :func:`lock` makes the check and the record of one (kind, key)
serial until the transaction ends: a PostgreSQL transaction-scoped advisory lock on the key;
SQLite already runs one writing transaction at a time (BEGIN IMMEDIATE, vsr_core.db).
"""

from __future__ import annotations

import hashlib
import random
from datetime import timedelta

from fastapi import Request
from sqlalchemy import delete, func, text
from sqlmodel import Session, col, select

from vsr_core.models import RateEvent
from vsr_core.settings import Settings
from vsr_core.types import utcnow
from webapp.http.errors import PageError

LOGIN_FAILED = "login_failed"
NEW_WORKER = "new_worker"
NEW_BATCH = "new_batch"
STUDY_KEY = "study"  # the key of site-wide (per-study) counts
KEEP = timedelta(days=2)  # the dashboard shows the last day's bursts


def _lock_id(kind: str, key: str) -> int:
    digest = hashlib.blake2b(f"vsr-rate|{kind}|{key[:200]}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)  # pg_advisory_xact_lock takes a bigint


def lock(session: Session, kind: str, key: str) -> None:
    """Hold (kind, key) until the session's transaction ends: a concurrent check of the same
    key waits here, and then counts the event this transaction records. Take several keys
    always in the same order (an address before the site-wide key)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_id(kind, key)})
    # SQLite: the transaction began with BEGIN IMMEDIATE and holds the database's write lock.


def take(
    session: Session,
    kind: str,
    key: str,
    limit: int,
    window_seconds: float,
    worker_id: int | None = None,
) -> int:
    """Check and record one event in one step: 0 and the event recorded (flushed; the
    caller commits), or the seconds to wait and nothing recorded."""
    lock(session, kind, key)
    wait = retry_after(session, kind, key, limit, window_seconds)
    if not wait:
        record(session, kind, key, worker_id)
    return wait


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


def record(
    session: Session,
    kind: str,
    key: str,
    worker_id: int | None = None,
    study_id: int | None = None,
) -> None:
    """Add one event (flushed; the caller commits)."""
    session.add(RateEvent(kind=kind, key=key[:200], worker_id=worker_id, study_id=study_id))
    if random.random() < 0.01:  # prune now and then; the index keeps counting cheap meanwhile
        session.execute(delete(RateEvent).where(col(RateEvent.at) < utcnow() - KEEP))
    session.flush()


def clear(session: Session, kind: str, key: str) -> None:
    session.execute(delete(RateEvent).where(col(RateEvent.kind) == kind, col(RateEvent.key) == key))


# --- the crowd's limits: new identities and new batches ------------------------------------


def client_address(request: Request) -> str:
    """The client's address: the peer's, or what a configured proxy forwarded (uvicorn puts
    it in ``request.client`` only for TRUSTED_PROXIES, see ``vsr serve``)."""
    return request.client.host if request.client else "?"


def _too_many(wait: int, what: str) -> PageError:
    minutes = wait // 60 + 1
    return PageError(
        429,
        f"Too many {what} are arriving right now. Please try again in {minutes} minute"
        f"{'s' if minutes != 1 else ''}; nothing you did so far is lost.",
    )


def check_new_worker(session: Session, settings: Settings, address: str) -> None:
    """Raise 429 when one more new identity from ``address`` (or site-wide) is over the
    limit (NEW_WORKERS_PER_ADDRESS, NEW_WORKERS_PER_STUDY per RATE_WINDOW_SECONDS).
    Both keys stay locked until the caller commits, so record_new_worker in the same
    transaction completes the step."""
    window = settings.rate_window_seconds
    for key, limit in (
        (address, settings.new_workers_per_address),
        (STUDY_KEY, settings.new_workers_per_study),
    ):
        if limit > 0:
            lock(session, NEW_WORKER, key)
        wait = retry_after(session, NEW_WORKER, key, limit, window)
        if wait:
            raise _too_many(wait, "new participants")


def record_new_worker(
    session: Session, address: str, worker_id: int | None, study_id: int | None = None
) -> None:
    """A new identity from ``address``, made entering the study ``study_id`` (the dashboard's
    bursts of one study show only the identities made entering it)."""
    record(session, NEW_WORKER, address, worker_id, study_id)
    record(session, NEW_WORKER, STUDY_KEY, worker_id, study_id)


def check_new_batch(session: Session, settings: Settings, address: str) -> None:
    """Raise 429 when one more batch from ``address`` is over NEW_BATCHES_PER_ADDRESS; the
    key stays locked until the caller records the batch and commits."""
    if settings.new_batches_per_address > 0:
        lock(session, NEW_BATCH, address)
    wait = retry_after(
        session,
        NEW_BATCH,
        address,
        settings.new_batches_per_address,
        settings.rate_window_seconds,
    )
    if wait:
        raise _too_many(wait, "new batches from your network")
