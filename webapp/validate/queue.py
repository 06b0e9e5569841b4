"""The validation queue: which Example a validator judges next, and recording the vote.

It plugs into the shared lease machinery (``webapp.crowd.leases``) as :class:`ExampleStrategy`;
batches, leases, expiry and completion codes are the same as for generation.

Rules (issue 5): only human and adversarial Examples are served; never to their author, never
twice to one validator; each gets ``votes_per_example`` votes (or its own ``target_votes``),
and more, up to ``max_votes_per_example``, while ``vsr_core.agreement.is_decided`` says the votes
so far leave the keep decision open. Gold Examples are mixed in at ``gold_rate``.

Concurrency: the vote and lease counts live on the Example row (``queue_*`` columns), so the
row lock taken by ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL) covers the whole check:
PostgreSQL re-checks a locked row's own columns against the WHERE clause when another
transaction changed it meanwhile, which it would not do for a count in a subquery. SQLite's
``BEGIN IMMEDIATE`` serialises writers outright. Every transaction locks an Assignment
before an Example (and several Examples in id order) so two never wait on each other.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Integer,
    String,
    and_,
    bindparam,
    case,
    false,
    func,
    literal,
    or_,
    true,
    update,
)
from sqlalchemy import select as sa_select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col, select

from vsr_core.agreement import is_decided
from vsr_core.models import (
    Assignment,
    Batch,
    BatchKind,
    BatchStatus,
    Example,
    ExampleOrigin,
    LeaseStatus,
    Vote,
    Worker,
)
from vsr_core.study import StudyConfig, load_study_config
from vsr_core.types import UTCDateTime, utcnow
from webapp.crowd import batches, leases
from webapp.validate.gold import check_gold_accuracy

# revalidation: fresh copies of imported Examples (vsr_core.revalidation), voted like new ones.
VOTABLE_ORIGINS = (
    ExampleOrigin.human.value,
    ExampleOrigin.adversarial.value,
    ExampleOrigin.revalidation.value,
)
REFERENCE_FRAMES = ("intrinsic", "relative", "both")


class VoteError(Exception):
    """A vote that cannot be recorded; ``status`` is the HTTP status the worker gets."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --- the serving rule, as SQL over the Example row -----------------------------------------


# Statements on the hot path are built once with bind parameters (see _statements): building
# SQLAlchemy expressions costs more CPU per request than running them.
_WORKER = bindparam("q_worker", type_=Integer)
_TARGET = bindparam("q_target", type_=Integer)
_MAX = bindparam("q_max", type_=Integer)


def room_params(config: StudyConfig) -> dict[str, int]:
    return {"q_target": config.votes_per_example, "q_max": config.max_votes_per_example}


def has_room() -> Any:
    """SQL: the Example may take one more lease (votes + active leases below its limit).

    Below the target any Example may; beyond it only once the target's votes are in and still
    leave the keep decision open (so pending leases are never doubled up on a guess).
    An Example's own ``target_votes`` overrides the study's; a target above the study maximum
    is its own maximum. Parameters: :func:`room_params`.
    """
    used = col(Example.queue_votes) + col(Example.queue_leases)
    target = func.coalesce(col(Example.target_votes), _TARGET)
    maximum = case((target > _MAX, target), else_=_MAX)
    return or_(
        used < target,
        and_(
            col(Example.queue_votes) >= target,
            col(Example.queue_settled) == false(),
            used < maximum,
        ),
    )


def decision_state(
    n_agree: int, n_votes: int, target: int, config: StudyConfig
) -> tuple[bool, bool]:
    """(settled, open): settled = the votes fix the keep decision whatever the minimum count;
    open = the Example still wants votes (not decided under the study's rule)."""
    maximum = max(target, config.max_votes_per_example)
    kwargs: dict[str, Any] = {
        "max_votes": maximum,
        "threshold": config.keep_threshold,
        "method": config.decide_method,
        "confidence": config.decide_confidence,
    }
    settled = is_decided(n_agree, n_votes, min_votes=0, **kwargs)
    decided = is_decided(n_agree, n_votes, min_votes=target, **kwargs)
    return settled, not decided


# --- the lease strategy ---------------------------------------------------------------------


@dataclass
class ExampleStrategy:
    """Validation: open Examples oldest first, with gold Examples mixed in at ``gold_rate``.

    ``config`` pins the study settings (tests, the benchmark); None reads them per request.
    """

    kind: str = BatchKind.validate
    item_field: str = "example_id"
    config: StudyConfig | None = None
    rng: random.Random = field(default_factory=random.Random)
    # Settings read from the database are reused this long: one query less per request on
    # the hot path, and an admin's change still applies within seconds.
    cache_seconds: float = 2.0
    _cached: tuple[float, StudyConfig] | None = field(default=None, repr=False)
    # Leases run for minutes, so sweeping for stale ones once a second per process is
    # plenty (0 = on every request, as the tests do).
    sweep_seconds: float = 0.0
    _last_sweep: float = field(default=-1e9, repr=False)
    # The lowest open Example id, reused this long (0 = looked up on every request). The
    # candidate query starts its index walk there: below it lie only closed Examples, whose
    # stale index entries (until VACUUM removes them) it would otherwise step over one by
    # one on every request, a cost that grows with every Example decided (bench/load.py:
    # the server saturated after ~40 s at 300 round trips/s on PostgreSQL without
    # autovacuum). An Example re-opened below the floor waits at most this long.
    floor_seconds: float = 0.0
    _floor: tuple[float, int] | None = field(default=None, repr=False)

    def sweep_due(self) -> bool:
        now = time.monotonic()
        if now - self._last_sweep < self.sweep_seconds:
            return False
        self._last_sweep = now
        return True

    def open_floor(self, session: Session) -> int:
        now = time.monotonic()
        if self._floor is None or now - self._floor[0] >= self.floor_seconds:
            floor = _core(session, _statements(_dialect(session)).open_floor, {}).scalar()
            self._floor = (now, int(floor or 0))
        return self._floor[1]

    def study(self, session: Session) -> StudyConfig:
        if self.config is not None:
            return self.config
        now = time.monotonic()
        if self._cached is None or now - self._cached[0] > self.cache_seconds:
            self._cached = (now, load_study_config(session))
        return self._cached[1]

    def candidates(self, session: Session, worker_id: int, limit: int) -> Sequence[int]:
        gold = self._gold_turn(session, worker_id, limit)
        if gold:
            return gold
        config = self.study(session)
        return regular_candidates(session, worker_id, config, limit, self.open_floor(session))

    def available(self, session: Session, worker_id: int, limit: int) -> int:
        """How many items (up to ``limit``) this worker could be served now: the open
        Examples they have not seen (read without locking), plus the gold share that comes
        with them at ``gold_rate``, no more than the gold items they have not seen."""
        config = self.study(session)
        regular = len(regular_candidates(session, worker_id, config, limit, 0))
        gold = 0
        if config.gold_rate > 0 and regular:
            share = config.gold_rate / max(1e-9, 1 - config.gold_rate)
            gold = min(round(regular * share), len(gold_candidates(session, worker_id, limit)))
        return min(limit, regular + gold)

    def _gold_turn(self, session: Session, worker_id: int, limit: int) -> list[int]:
        """Gold items for this turn: drawn at the study's ``gold_rate``; [] on a regular turn
        or when the worker has seen every gold item."""
        config = self.study(session)
        if config.gold_rate > 0 and self.rng.random() < config.gold_rate:
            return gold_candidates(session, worker_id, limit)
        return []

    def lease_next(
        self,
        session: Session,
        batch_id: int,
        worker_id: int,
        batch_deadline: datetime,
        lease_minutes: int,
        now: datetime,
    ) -> tuple[int, int] | None:
        """Lease the worker's next item: (lease id, Example id), or None when none is left.

        The shared ``leases.lease_item`` (``candidates``, then the lease) except for a
        regular item on PostgreSQL, which one statement finds, locks, counts and leases
        (``lease_regular``): the per-statement cost is most of a round trip's CPU.
        """
        if _dialect(session) != "postgresql":
            return leases.lease_item(
                session, batch_id, worker_id, batch_deadline, self, lease_minutes, now
            )
        gold = self._gold_turn(session, worker_id, 1)
        if gold:
            lease_id = leases.insert_lease(
                session, batch_id, worker_id, batch_deadline, self, lease_minutes, now, gold[0]
            )
            return lease_id, gold[0]
        row = _core(session, _statements("postgresql").lease_regular, {
            "q_worker": worker_id, "q_limit": 1, "q_floor": self.open_floor(session),
            **room_params(self.study(session)), "q_batch": batch_id, "q_now": now,
            "q_expires": leases.lease_expiry(now, lease_minutes, batch_deadline),
        }).first()
        return (row.id, row.example_id) if row is not None else None

    def on_leased(self, session: Session, item_id: int) -> None:
        _core(session, _statements(_dialect(session)).lease_taken, {"q_id": item_id})

    def on_returned(self, session: Session, item_id: int) -> None:
        _core(session, _statements(_dialect(session)).lease_returned, {"q_id": item_id})


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def _core(session: Session, stmt: Any, params: dict[str, Any]) -> Any:
    """Run a prebuilt Core statement on the session's connection (same transaction).

    ``session.execute`` would treat an UPDATE of a mapped table as an ORM bulk update (and
    synchronise matching objects in the identity map), which costs more CPU than the
    statement itself on the hot path. Pending ORM changes are flushed first, as autoflush
    would. Example rows changed this way are not refreshed in the session; the hot path does
    not load them as objects.
    """
    if session.new or session.dirty or session.deleted:
        session.flush()
    return session.connection().execute(stmt, params)


def _not_seen_by(worker: Any, floor: Any = None) -> list[Any]:
    """Conditions: not the worker's own Example, never leased or voted by them before.

    ``NOT IN`` over the worker's own leases and votes, not ``NOT EXISTS``: PostgreSQL reads
    those once and hashes them, where the anti-join it planned for ``NOT EXISTS`` walked
    every lease of every worker in Example id order (0.9 ms and growing with the run,
    against 0.1 ms). With ``floor`` only those at or above it are read, through the
    (worker_id, example_id) indexes: the cost stays with the open Examples instead of growing
    with the validator's history.
    """
    leased = [col(Assignment.worker_id) == worker, col(Assignment.example_id).is_not(None)]
    voted = [col(Vote.worker_id) == worker]
    if floor is not None:
        leased.append(col(Assignment.example_id) >= floor)
        voted.append(col(Vote.example_id) >= floor)
    return [
        or_(col(Example.author_id).is_(None), col(Example.author_id) != worker),
        col(Example.id).not_in(sa_select(col(Assignment.example_id)).where(*leased)),
        col(Example.id).not_in(sa_select(col(Vote.example_id)).where(*voted)),
    ]


def _no_sibling_nearby(worker: Any) -> Any:
    """Condition: the other Example of the same annotation (the same caption on its other
    image) was not leased to this validator in their current validation batch, nor as the
    last item of their previous one.

    The two Examples of one caption have opposite labels, so seeing both in one batch or back
    to back across a batch boundary tells the validator that one is True and the other False
    (issue 12). Only the previous batch's last lease counts, not the whole batch: a validator
    whose last batch held one half of every caption must still be offered the other halves in
    the next (excluding the whole previous batch starved them for good, since no new batch
    opens while nothing is on offer). Part of the candidate query, so both backends apply it
    with no extra statement; the batch ids are uncorrelated subqueries (evaluated once), the
    previous batch's last lease is read by the (batch_id, id) index, and each candidate's
    sibling by ix_example_annotation_id and ix_assignment_worker_example.
    """
    sibling = Example.__table__.alias("sibling")  # type: ignore[attr-defined]
    lease = _A.alias("sibling_lease")
    last_of_previous = _A.alias("previous_batch_lease")

    def batch_back(offset: int) -> Any:
        return (
            sa_select(_B.c.id)
            .where(_B.c.worker_id == worker, _B.c.kind == BatchKind.validate.value)
            .order_by(_B.c.id.desc())
            .limit(1)
            .offset(offset)
            .scalar_subquery()
        )

    previous_last_lease = (
        sa_select(func.max(last_of_previous.c.id))
        .where(last_of_previous.c.batch_id == batch_back(1))
        .scalar_subquery()
    )
    seen_sibling = (
        sa_select(literal(1))
        .select_from(sibling.join(lease, lease.c.example_id == sibling.c.id))
        .where(
            sibling.c.annotation_id == col(Example.annotation_id),
            sibling.c.id != col(Example.id),
            lease.c.worker_id == worker,
            or_(lease.c.batch_id == batch_back(0), lease.c.id == previous_last_lease),
        )
        .exists()
    )
    return or_(col(Example.annotation_id).is_(None), ~seen_sibling)


@dataclass(frozen=True)
class _Statements:
    regular: Any
    open_floor: Any
    gold: Any
    lease_taken: Any
    lease_returned: Any
    lock_lease: Any
    batch_state: Any
    lease_regular: Any  # PostgreSQL only
    write_vote: Any  # PostgreSQL only
    late_ok: Any
    count_vote: Any
    insert_vote: Any
    set_state: Any


_A = Assignment.__table__  # type: ignore[attr-defined]
_B = Batch.__table__  # type: ignore[attr-defined]
_V = Vote.__table__  # type: ignore[attr-defined]
_W = Worker.__table__  # type: ignore[attr-defined]


def _batch_columns(exclude_lease: Any = None) -> list[Any]:
    """The batch's state in one row: its own columns (with the done count it keeps) and its
    active lease, if the newest lease (other than ``exclude_lease``) is one. Constant work
    however far the batch has got: one step down ix_assignment_batch_lease.

    Only the newest lease is looked at: leases are taken one at a time, so an older one
    still active was left behind in another tab, and it expires like any other.
    """
    newest = _A.alias("newest_lease")
    where = [newest.c.batch_id == _B.c.id]
    if exclude_lease is not None:
        where.append(newest.c.id != exclude_lease)

    def if_active(column: Any) -> Any:
        return (
            sa_select(case((newest.c.status == LeaseStatus.active.value, column)))
            .where(*where)
            .order_by(newest.c.id.desc())
            .limit(1)
            .scalar_subquery()
        )

    return [
        _B.c.id.label("batch_id"),
        _B.c.status.label("batch_status"),
        _B.c.size.label("batch_size"),
        _B.c.deadline.label("batch_deadline"),
        _B.c.completion_code.label("completion_code"),
        _B.c.done_count.label("done"),
        if_active(newest.c.id).label("active_id"),
        if_active(newest.c.example_id).label("active_example_id"),
    ]


@functools.cache
def _statements(dialect: str) -> _Statements:
    postgres = dialect == "postgresql"
    example_id = bindparam("q_id", type_=Integer)
    open_non_gold = (col(Example.queue_open) == true(), col(Example.is_gold) == false())
    floor = bindparam("q_floor", type_=Integer)
    regular = (
        select(Example.id)
        .where(
            *open_non_gold,
            col(Example.id) >= floor,
            col(Example.origin).in_(VOTABLE_ORIGINS),
            has_room(),
            *_not_seen_by(_WORKER, floor),
            _no_sibling_nearby(_WORKER),
        )
        .order_by(col(Example.id))
        .limit(bindparam("q_limit", type_=Integer))
    )
    # Gold rows are shared by every validator and their counters are not touched, so they
    # are read without a lock; random order so validators do not all meet the same one first.
    gold = (
        select(Example.id)
        .where(
            col(Example.is_gold) == true(),
            col(Example.gold_label).is_not(None),
            *_not_seen_by(_WORKER),
        )
        .order_by(func.random())
        .limit(bindparam("q_limit", type_=Integer))
    )
    lease_param = bindparam("q_lease", type_=Integer)
    # One statement per request for who and where: the lease (locked: two submits of one
    # lease serialise here), its worker's blocked flag, its batch with the leases done and
    # any other active lease, and a vote already stored for it (an idempotent replay).
    lock_lease = (
        sa_select(
            _A.c.worker_id, _A.c.kind, _A.c.status, _A.c.example_id, _W.c.blocked,
            *_batch_columns(exclude_lease=_A.c.id),
            _V.c.id.label("vote_id"), _V.c.value, _V.c.reference_frame, _V.c.duration_ms,
            _V.c.created_at,
        )
        .select_from(
            _A.join(_B, _B.c.id == _A.c.batch_id)
            .join(_W, _W.c.id == _A.c.worker_id)
            .outerjoin(_V, _V.c.assignment_id == _A.c.id)
        )
        .where(_A.c.id == lease_param)
    )
    # The worker (None: unknown) and their open batch of this kind, if any, in one row.
    batch_state = (
        sa_select(_W.c.blocked, *_batch_columns())
        .select_from(
            _W.outerjoin(
                _B,
                and_(
                    _B.c.worker_id == _W.c.id,
                    _B.c.kind == BatchKind.validate.value,
                    _B.c.status == BatchStatus.open.value,
                ),
            )
        )
        .where(_W.c.id == _WORKER)
        .order_by(_B.c.id.desc())
        .limit(1)
    )
    late_ok = select(Example.id).where(
        col(Example.id) == example_id,
        or_(col(Example.is_gold) == true(), and_(col(Example.queue_open) == true(), has_room())),
    )
    if postgres:
        # PostgreSQL: skip rows other transactions hold (as webapp.crowd.leases.lock_rows does);
        # SQLite's BEGIN IMMEDIATE already serialises writers.
        regular = regular.with_for_update(skip_locked=True)
        lock_lease = lock_lease.with_for_update(of=_A)
        late_ok = late_ok.with_for_update()
    value = bindparam("q_value", type_=Boolean)
    release = bindparam("q_release", type_=Integer)
    count_vote = (
        update(Example)
        .where(col(Example.id) == example_id)
        .values(
            queue_votes=col(Example.queue_votes) + 1,
            queue_agree=col(Example.queue_agree) + case((col(Example.label) == value, 1), else_=0),
            queue_leases=col(Example.queue_leases)
            - case((col(Example.is_gold) == true(), 0), else_=release),
        )
        .returning(
            col(Example.queue_votes),
            col(Example.queue_agree),
            col(Example.target_votes),
            col(Example.is_gold),
            col(Example.queue_settled),
            col(Example.queue_open),
        )
    )
    # ON CONFLICT DO NOTHING instead of a savepoint: a clash with uq_vote_example_worker (the
    # same validator, another lease of this Example) returns no row. Both backends have it.
    insert = pg_insert if postgres else sqlite_insert
    insert_vote = insert(Vote).on_conflict_do_nothing().returning(col(Vote.id))
    lease_regular = write_vote = None
    if postgres:
        # One statement each for the two halves of a round trip (data-modifying CTEs):
        # find, lock, count and lease the next regular item; store the vote, finish the
        # lease and count it on the batch. SQLite runs the same steps one by one.
        cand = regular.cte("cand")
        taken = (
            update(Example)
            .where(col(Example.id).in_(sa_select(cand.c.id)))
            .values(queue_leases=col(Example.queue_leases) + 1)
            .returning(col(Example.id))
            .cte("taken")
        )
        lease_regular = (
            insert(Assignment)
            .from_select(
                ["batch_id", "worker_id", "kind", "example_id", "status", "leased_at",
                 "lease_expires_at"],
                sa_select(
                    bindparam("q_batch", type_=Integer), _WORKER,
                    literal(BatchKind.validate.value), cand.c.id,
                    literal(LeaseStatus.active.value),
                    bindparam("q_now", type_=UTCDateTime()),
                    bindparam("q_expires", type_=UTCDateTime()),
                ).select_from(cand),
            )
            .returning(col(Assignment.id), col(Assignment.example_id))
            .add_cte(taken)
        )
        # The vote is inserted from the counting UPDATE's row, a data dependency: the
        # Example is locked and counted before the vote takes its id, so votes of one
        # Example get ids in the order they were counted.
        counted_example = count_vote.cte("counted_example")
        finished = leases.FINISH_LEASE.returning(col(Assignment.id)).cte("finished")
        counted = leases.COUNT_DONE_ON_BATCH.cte("counted")
        stored = (
            pg_insert(Vote)
            .from_select(
                list(VOTE_FIELDS),
                # "v_" names: an UPDATE in the same statement would take execution
                # parameters named like its table's columns (worker_id, ...) as values to SET.
                sa_select(*(bindparam(f"v_{name}", type_=_VOTE_TYPES.get(name))
                            for name in VOTE_FIELDS)).select_from(counted_example),
            )
            .on_conflict_do_nothing()
            .returning(col(Vote.id))
            .cte("stored")
        )
        write_vote = (
            sa_select(
                *counted_example.c, counted.c.done_count, stored.c.id.label("vote_id")
            )
            .select_from(counted_example.join(counted, true()).outerjoin(stored, true()))
            .add_cte(finished)
        )
    return _Statements(
        regular=regular,
        lease_regular=lease_regular,
        write_vote=write_vote,
        open_floor=sa_select(func.min(col(Example.id))).where(*open_non_gold),
        gold=gold,
        lease_taken=update(Example)
        .where(col(Example.id) == example_id, col(Example.is_gold) == false())
        .values(queue_leases=col(Example.queue_leases) + 1),
        lease_returned=update(Example)
        .where(
            col(Example.id) == example_id,
            col(Example.is_gold) == false(),
            col(Example.queue_leases) > 0,
        )
        .values(queue_leases=col(Example.queue_leases) - 1),
        lock_lease=lock_lease,
        batch_state=batch_state,
        late_ok=late_ok,
        count_vote=count_vote,
        insert_vote=insert_vote,
        set_state=update(Example)
        .where(col(Example.id) == example_id)
        .values(
            queue_settled=bindparam("q_settled", type_=Boolean),
            queue_open=bindparam("q_open", type_=Boolean),
        ),
    )


def regular_candidates(
    session: Session, worker_id: int, config: StudyConfig, limit: int, floor: int = 0
) -> list[int]:
    params = {"q_worker": worker_id, "q_limit": limit, "q_floor": floor, **room_params(config)}
    rows = _core(session, _statements(_dialect(session)).regular, params).scalars()
    return [i for i in rows if i is not None]


def gold_candidates(session: Session, worker_id: int, limit: int) -> list[int]:
    params = {"q_worker": worker_id, "q_limit": limit}
    rows = _core(session, _statements(_dialect(session)).gold, params).scalars()
    return [i for i in rows if i is not None]


# --- expiry, release -----------------------------------------------------------------------


def expire_stale(session: Session, strategy: ExampleStrategy, now: datetime | None = None) -> int:
    """Expire validation leases whose time ran out, in Example id order (see module doc).

    ``leases.take_next`` also expires stale leases, in no particular order; running this
    first in the same transaction leaves it nothing to do, so Example rows are always locked
    in ascending order and two sweeps never deadlock.
    """
    now = now or utcnow()
    stmt = (
        select(Assignment)
        .where(
            Assignment.kind == strategy.kind,
            Assignment.status == LeaseStatus.active,
            col(Assignment.lease_expires_at) < now,
        )
        .order_by(col(Assignment.example_id), col(Assignment.id))
    )
    stale = session.exec(leases.lock_rows(stmt, session)).all()
    for lease in stale:
        lease.status = LeaseStatus.expired
        lease.finished_at = now
        session.add(lease)
        if lease.example_id is not None:
            strategy.on_returned(session, lease.example_id)
    return len(stale)


# --- serving and voting --------------------------------------------------------------------
#
# The hot path (every validation round trip) runs prebuilt Core statements on the session's
# connection and reads plain rows: a vote with the next item is about eight statements and
# one commit. ORM objects are loaded only on the rare turns (a batch ending, a gold check).

Display = Callable[[Session, int], dict[str, Any]]
"""Builds what the validator is shown of an Example (``webapp.validate.view``); called
inside the transaction, so the answer needs no second connection after the commit."""


@dataclass
class NextItem:
    """The outcome of asking for work, as plain values (nothing to reload after the commit).

    ``lease_id`` None: nothing left for this worker; the batch has ended (``batch_status``).
    """

    lease_id: int | None
    example_id: int | None
    done: int
    batch_size: int
    batch_status: str
    completion_code: str | None
    deadline: datetime | None
    display: dict[str, Any] | None = None


def _unusable(blocked: bool | None) -> None:
    if blocked is None:
        raise VoteError(401, "We do not know who you are yet.")
    if blocked:
        raise VoteError(403, "This account cannot take part in the study.")


def _worker_id(worker: Worker | int) -> int:
    if isinstance(worker, Worker):
        assert worker.id is not None
        return worker.id
    return worker


def begin_batch(
    session: Session,
    worker: Worker,
    strategy: ExampleStrategy,
    entry: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Batch:
    """Open (or resume) the worker's validation batch. Commits.

    Raises ``batches.BatchError`` when the daily limit is used up.
    """
    try:
        batch = batches.open_or_resume(
            session, worker, strategy.kind, strategy.study(session), strategy, entry, now=now
        )
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return batch


def next_item(
    session: Session,
    worker: Worker | int,
    strategy: ExampleStrategy,
    now: datetime | None = None,
    display: Display | None = None,
) -> NextItem | None:
    """The worker's current or next validation item in their open batch. Commits.

    None when the worker has no open batch (send them to the instructions or the done page).
    A batch that ends here (size reached, time up, pool dry) comes back with no lease and
    its completion code set, or status ``returned`` when nothing was done.
    Raises :class:`VoteError` 401 / 403 for an unknown or blocked worker.
    """
    now = now or utcnow()
    worker_id = _worker_id(worker)
    config = strategy.study(session)
    try:
        row = _core(session, _statements(_dialect(session)).batch_state, {"q_worker": worker_id})
        state = row.first()
        _unusable(state.blocked if state is not None else None)
        assert state is not None
        if state.batch_id is None:
            session.rollback()
            return None
        active = (state.active_id, state.active_example_id) if state.active_id else None
        item = _advance(
            session, worker_id, state, state.done, active, strategy, config, now, display
        )
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return item


def _ended(session: Session, batch_id: int, done: int) -> NextItem:
    batch = session.get(Batch, batch_id)
    assert batch is not None
    return NextItem(None, None, done, batch.size, batch.status, batch.completion_code,
                    batch.deadline)


def _advance(
    session: Session,
    worker_id: int,
    state: Any,
    done: int,
    active: tuple[int, int] | None,
    strategy: ExampleStrategy,
    config: StudyConfig,
    now: datetime,
    display: Display | None,
) -> NextItem:
    """Within the caller's transaction: end the batch if due, else resume or take a lease.

    ``state`` is a row with the batch columns of :func:`_batch_columns`; ``active`` the
    batch's active lease (id, example id), if any.
    """
    if state.batch_status == BatchStatus.open and state.batch_deadline <= now:
        batch = session.get(Batch, state.batch_id)
        assert batch is not None
        batches.expire_if_due(session, batch, config, strategy, now)
        return _ended(session, state.batch_id, done)
    lease_id = example_id = None
    if done < state.batch_size:
        if strategy.sweep_due():
            expire_stale(session, strategy, now)
            # The sweep may have ended the batch's own lease: read it again.
            lease = leases.active_lease(session, state.batch_id)
            active = None
            if lease is not None and lease.id is not None and lease.example_id is not None:
                active = (lease.id, lease.example_id)
        if active is not None:
            lease_id, example_id = active
        else:
            taken = strategy.lease_next(
                session, state.batch_id, worker_id, state.batch_deadline,
                config.lease_minutes, now,
            )
            if taken is not None:
                lease_id, example_id = taken
    if lease_id is None or example_id is None:
        batch = session.get(Batch, state.batch_id)
        assert batch is not None
        if done > 0:
            batches.complete(session, batch, config, strategy, now)
        else:
            batches.give_up(session, batch, strategy)
        return _ended(session, state.batch_id, done)
    return NextItem(
        lease_id, example_id, done, state.batch_size, state.batch_status,
        state.completion_code, state.batch_deadline,
        display(session, example_id) if display is not None else None,
    )


@dataclass
class VoteOutcome:
    vote: Vote
    created: bool  # False: the same assignment was submitted before (idempotent replay)
    done: int
    batch_size: int
    batch_status: str
    completion_code: str | None
    flagged: bool = False
    next: NextItem | None = None  # with then_next


def record_vote(
    session: Session,
    worker: Worker | int,
    assignment_id: int,
    value: bool,
    strategy: ExampleStrategy,
    reference_frame: str | None = None,
    duration_ms: int | None = None,
    now: datetime | None = None,
    then_next: bool = False,
    display: Display | None = None,
) -> VoteOutcome:
    """Record a validator's vote for the item leased to them. Commits, or changes nothing.

    Resubmitting the same assignment returns the stored vote (idempotent). A vote that
    arrives after its lease ran out is still taken if the Example has room for it.
    With ``then_next`` the next item is leased in the same transaction (``outcome.next``):
    one commit per round trip instead of two.
    Raises :class:`VoteError` (404 not this worker's item, 409 no longer acceptable, 403 a
    blocked worker).
    """
    if reference_frame is not None and reference_frame not in REFERENCE_FRAMES:
        raise VoteError(422, "The reference frame must be intrinsic, relative or both.")
    if duration_ms is not None and not 0 <= duration_ms <= 24 * 3600 * 1000:
        duration_ms = None  # a client clock glitch is not worth refusing a vote for
    now = now or utcnow()
    config = strategy.study(session)
    worker_id = _worker_id(worker)
    try:
        outcome, state = _record_vote(
            session, worker, worker_id, assignment_id, value, strategy, config,
            reference_frame, duration_ms, now,
        )
        if then_next and outcome.batch_status == BatchStatus.open:
            active = (state.active_id, state.active_example_id) if state.active_id else None
            outcome.next = _advance(
                session, worker_id, state, outcome.done, active, strategy, config, now, display
            )
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return outcome


def _record_vote(
    session: Session,
    worker: Worker | int,
    worker_id: int,
    assignment_id: int,
    value: bool,
    strategy: ExampleStrategy,
    config: StudyConfig,
    reference_frame: str | None,
    duration_ms: int | None,
    now: datetime,
) -> tuple[VoteOutcome, Any]:
    statements = _statements(_dialect(session))
    params = {"q_lease": assignment_id}
    lease = _core(session, statements.lock_lease, params).first()
    if lease is not None and lease.vote_id is None and lease.status == LeaseStatus.done:
        # A concurrent submit of this lease committed while this one waited for its lock:
        # PostgreSQL hands back the lease row as now committed but reads the joined vote and
        # batch from this statement's older snapshot. Read once more (a new statement, a new
        # snapshot under READ COMMITTED; the lock is already held) to reply as a replay.
        # Only on this rare turn: the common path keeps its one statement.
        lease = _core(session, statements.lock_lease, params).first()
    if (
        lease is None
        or lease.worker_id != worker_id
        or lease.kind != strategy.kind
        or lease.example_id is None
    ):
        raise VoteError(404, "This item is not one of yours. Please reload the page.")
    _unusable(lease.blocked)
    if lease.vote_id is not None:
        existing = Vote(
            id=lease.vote_id, example_id=lease.example_id, worker_id=worker_id,
            value=lease.value, reference_frame=lease.reference_frame,
            duration_ms=lease.duration_ms, assignment_id=assignment_id,
            created_at=lease.created_at,
        )
        return VoteOutcome(existing, False, lease.done, lease.batch_size, lease.batch_status,
                           lease.completion_code), lease
    example_id = lease.example_id
    held = lease.status == LeaseStatus.active
    if not held:
        if lease.status not in (LeaseStatus.expired, LeaseStatus.released):
            raise VoteError(409, "This item was already answered. Please reload the page.")
        late_ok = _core(
            session, statements.late_ok, {"q_id": example_id, **room_params(config)}
        ).first()
        if late_ok is None:
            raise VoteError(
                409, "The time for this item ran out and it went to someone else. "
                "Please reload the page for the next one."
            )
    values: dict[str, Any] = {
        "example_id": example_id,
        "worker_id": worker_id,
        "value": value,
        "reference_frame": reference_frame,
        "duration_ms": duration_ms,
        "assignment_id": assignment_id,
        "created_at": now,
    }
    vote_id, done, is_gold = _store_vote(session, values, held, lease.batch_id, config, now)
    if vote_id is None:
        raise VoteError(409, "You have already judged this caption.")
    vote = Vote(id=vote_id, **values)
    outcome = VoteOutcome(vote, True, done, lease.batch_size, lease.batch_status,
                          lease.completion_code)
    if is_gold:
        who = worker if isinstance(worker, Worker) else session.get(Worker, worker_id)
        assert who is not None
        outcome.flagged = check_gold_accuracy(
            session, who, config, strategies={strategy.kind: strategy}
        )
        if outcome.flagged:  # blocking ends the batch (and commits): read it again
            batch = session.get(Batch, lease.batch_id, populate_existing=True)
            assert batch is not None
            outcome.batch_status = batch.status
    if outcome.batch_status == BatchStatus.open and done >= lease.batch_size:
        batch = session.get(Batch, lease.batch_id)
        assert batch is not None
        batches.complete(session, batch, config, strategy, now)
        outcome.batch_status, outcome.completion_code = batch.status, batch.completion_code
    return outcome, lease


VOTE_FIELDS = ("example_id", "worker_id", "value", "reference_frame", "duration_ms",
               "assignment_id", "created_at")
_VOTE_TYPES: dict[str, Any] = {
    "example_id": Integer(), "worker_id": Integer(), "value": Boolean(),
    "reference_frame": String(),
    "duration_ms": Integer(), "assignment_id": Integer(), "created_at": UTCDateTime(),
}


def _store_vote(
    session: Session,
    values: dict[str, Any],
    held: bool,
    batch_id: int,
    config: StudyConfig,
    now: datetime,
) -> tuple[int | None, int, bool]:
    """Count the vote on its Example (settling or closing it), store it, finish its lease
    and count that on the batch: (vote id, or None when this validator already judged the
    Example through another lease; leases done; the Example is gold).

    On PostgreSQL one statement (then a second only when the keep decision changes); on
    SQLite the same steps one by one, counting first.
    """
    statements = _statements(_dialect(session))
    example_id = values["example_id"]
    count = {"q_id": example_id, "q_value": values["value"], "q_release": 1 if held else 0}
    lease = {"q_lease": values["assignment_id"], "q_now": now, "q_batch": batch_id}
    if statements.write_vote is not None:
        params = {f"v_{name}": value for name, value in values.items()}
        row = _core(session, statements.write_vote, {**count, **params, **lease}).one()
        vote_id, done = row.vote_id, int(row.done_count)
    else:
        row = _core(session, statements.count_vote, count).one()
        vote_id = _core(session, statements.insert_vote, values).scalar()
        _core(session, leases.FINISH_LEASE, lease)
        done = int(_core(session, leases.COUNT_DONE_ON_BATCH, lease).scalar_one())
    target = row.target_votes or config.votes_per_example
    settled, still_open = decision_state(row.queue_agree, row.queue_votes, target, config)
    if vote_id is not None and (settled, still_open) != (row.queue_settled, row.queue_open):
        _core(
            session, statements.set_state,
            {"q_id": example_id, "q_settled": settled, "q_open": still_open},
        )
    return vote_id, done, bool(row.is_gold)


# --- upkeep -----------------------------------------------------------------------------------


def refresh_queue(session: Session, config: StudyConfig) -> int:
    """Recompute every Example's settled/open state under the current study settings (after
    an admin changes votes, maximum, threshold or method). Returns how many changed. Commits."""
    rows = session.execute(
        sa_select(
            col(Example.id), col(Example.queue_agree), col(Example.queue_votes),
            col(Example.target_votes), col(Example.queue_settled), col(Example.queue_open),
        ).where(col(Example.origin).in_(VOTABLE_ORIGINS))
    ).all()
    changed = 0
    for ex_id, agree, votes, target_votes, was_settled, was_open in rows:
        state = decision_state(agree, votes, target_votes or config.votes_per_example, config)
        if state != (was_settled, was_open):
            session.execute(
                update(Example)
                .where(col(Example.id) == ex_id)
                .values(queue_settled=state[0], queue_open=state[1])
            )
            changed += 1
    session.commit()
    return changed


@dataclass(frozen=True)
class QueueMismatch:
    example_id: int
    field: str
    stored: int
    actual: int


def audit_counters(session: Session) -> list[QueueMismatch]:
    """Compare the denormalised queue counters with the Vote and Assignment tables (tests,
    the load benchmark, and an admin's sanity check)."""
    votes = dict(
        session.exec(select(Vote.example_id, func.count()).group_by(col(Vote.example_id))).all()
    )
    agree = dict(
        session.exec(
            select(Vote.example_id, func.count())
            .join(Example, col(Example.id) == col(Vote.example_id))
            .where(col(Vote.value) == col(Example.label))
            .group_by(col(Vote.example_id))
        ).all()
    )
    active = dict(
        session.exec(
            select(Assignment.example_id, func.count())
            .join(Example, col(Example.id) == col(Assignment.example_id))
            .where(Assignment.status == LeaseStatus.active, col(Example.is_gold) == false())
            .group_by(col(Assignment.example_id))
        ).all()
    )
    out = []
    rows = session.execute(
        sa_select(
            col(Example.id), col(Example.queue_votes), col(Example.queue_agree),
            col(Example.queue_leases),
        ).where(col(Example.origin).in_(VOTABLE_ORIGINS))
    ).all()
    for ex_id, q_votes, q_agree, q_leases in rows:
        for name, stored, actual in (
            ("votes", q_votes, votes.get(ex_id, 0)),
            ("agree", q_agree, agree.get(ex_id, 0)),
            ("leases", q_leases, active.get(ex_id, 0)),
        ):
            if stored != actual:
                out.append(QueueMismatch(int(ex_id), name, int(stored), int(actual)))
    done = dict(
        session.exec(
            select(Assignment.batch_id, func.count())
            .where(Assignment.status == LeaseStatus.done)
            .group_by(col(Assignment.batch_id))
        ).all()
    )
    for batch_id, stored in session.execute(sa_select(col(Batch.id), col(Batch.done_count))):
        if stored != done.get(batch_id, 0):
            out.append(QueueMismatch(int(batch_id), "batch_done", int(stored),
                                     done.get(batch_id, 0)))
    return out
