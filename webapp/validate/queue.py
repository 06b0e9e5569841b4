"""The validation queue: which Example a validator judges next, and recording the vote.

It plugs into the shared lease machinery (``webapp.crowd.leases``) as :class:`ExampleStrategy`;
batches, leases, expiry and completion codes are the same as for generation.

Rules (docs/validation.md): only human and adversarial Examples are served; never to their
author, never twice to one validator; each gets ``votes_per_example`` votes (or its own
``target_votes``), and more, up to ``max_votes_per_example``, while
``vsr_core.agreement.is_decided`` says the votes so far leave the keep decision open. Gold
Examples are mixed in at ``gold_rate``.

Concurrency: the vote and lease counts live on the Example row (``queue_*`` columns), so the
row lock taken by ``SELECT ... FOR UPDATE SKIP LOCKED`` (PostgreSQL) covers the whole check:
PostgreSQL re-checks a locked row's own columns against the WHERE clause when another
transaction changed it meanwhile, which it would not do for a count in a subquery. SQLite's
``BEGIN IMMEDIATE`` serialises writers outright. Every transaction locks an Assignment
before an Example (and several Examples in id order) so two never wait on each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session

from vsr_core.authenticity import ItemSignals
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Batch,
    BatchStatus,
    LeaseStatus,
    Worker,
)
from vsr_core.studies.settings import StudyConfig
from vsr_core.types import utcnow
from webapp.crowd import batches, leases
from webapp.crowd.signals import signal_values, store_signals
from webapp.validate.gold import check_gold_accuracy
from webapp.validate.rules import (
    DECISION_OF_CHAR,
    REFERENCE_FRAMES,
    decision_state,
    decision_states,
    room_params,
)
from webapp.validate.statements import (
    dialect_of,
    run_prebuilt,
    statements_for,
)
from webapp.validate.strategy import ExampleStrategy, expire_stale


class VoteError(Exception):
    """A vote that cannot be recorded; ``status`` is the HTTP status the worker gets."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --- serving and voting --------------------------------------------------------------------
#
# The hot path (every validation round trip) runs prebuilt Core statements on the session's
# connection and reads plain rows. On PostgreSQL a vote with the next item is two statements
# (vote_on_active, lease_regular) and one commit; SQLite runs the same steps one by one.
# ORM objects are loaded only on the rare turns (a batch ending, a gold check).

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
    study_id: int = DEFAULT_STUDY_ID,
) -> Batch:
    """Open (or resume) the worker's validation batch in this study. Commits.

    Raises ``batches.BatchError`` when the daily limit is used up.
    """
    try:
        batch = batches.open_or_resume(
            session,
            worker,
            strategy.kind,
            strategy.study(session, study_id),
            strategy,
            entry,
            now=now,
            study_id=study_id,
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
    study_id: int = DEFAULT_STUDY_ID,
) -> NextItem | None:
    """The worker's current or next validation item in their open batch of this study (an
    item of that study only). Commits.

    None when the worker has no open batch (send them to the instructions or the done page).
    A batch that ends here (size reached, time up, pool dry) comes back with no lease and
    its completion code set, or status ``returned`` when nothing was done.
    Raises :class:`VoteError` 401 / 403 for an unknown or blocked worker.
    """
    now = now or utcnow()
    worker_id = _worker_id(worker)
    try:
        prebuilt = statements_for(dialect_of(session))
        row = run_prebuilt(
            session, prebuilt.batch_state, {"q_worker": worker_id, "q_study": study_id}
        )
        state = row.first()
        _unusable(state.blocked if state is not None else None)
        assert state is not None
        if state.batch_id is None:
            session.rollback()
            return None
        active = (state.active_id, state.active_example_id) if state.active_id else None
        item = _advance(session, worker_id, state, state.done, active, strategy, now, display)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return item


def _ended(session: Session, batch_id: int, done: int) -> NextItem:
    batch = session.get(Batch, batch_id)
    assert batch is not None
    return NextItem(
        None, None, done, batch.size, batch.status, batch.completion_code, batch.deadline
    )


def _advance(
    session: Session,
    worker_id: int,
    state: Any,
    done: int,
    active: tuple[int, int] | None,
    strategy: ExampleStrategy,
    now: datetime,
    display: Display | None,
) -> NextItem:
    """Within the caller's transaction: end the batch if due, else resume or take a lease.

    ``state`` is a row with the batch columns of :func:`batch_columns`; ``active`` the
    batch's active lease (id, example id), if any. Items come from the batch's study.
    """
    config = strategy.study(session, state.batch_study)
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
                session,
                state.batch_id,
                worker_id,
                state.batch_deadline,
                config.lease_minutes,
                now,
                state.batch_study,
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
        lease_id,
        example_id,
        done,
        state.batch_size,
        state.batch_status,
        state.completion_code,
        state.batch_deadline,
        display(session, example_id) if display is not None else None,
    )


@dataclass(frozen=True, slots=True)
class RecordedVote:
    """A stored vote as the caller sees it: the Vote row's values, without building an ORM
    object (an instrumented SQLModel instance costs about 25x a dataclass on every vote)."""

    id: int
    example_id: int
    worker_id: int
    value: bool
    reference_frame: str | None
    duration_ms: int | None
    assignment_id: int
    created_at: datetime


@dataclass
class VoteOutcome:
    vote: RecordedVote
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
    study_id: int = DEFAULT_STUDY_ID,
    signals: ItemSignals | None = None,
) -> VoteOutcome:
    """Record a validator's vote for the item leased to them. Commits, or changes nothing.

    Resubmitting the same assignment returns the stored vote (idempotent). A vote that
    arrives after its lease ran out is still taken if the Example has room for it.
    With ``then_next`` the next item is leased in the same transaction (``outcome.next``):
    one commit per round trip instead of two. ``study_id`` is the study the request works in:
    a vote on a lease of that study takes the one-statement path (the same rules either way),
    one of another study is refused.
    Raises :class:`VoteError` (404 not this worker's item or not this study's, 409 no longer
    acceptable, 403 a blocked worker). ``signals``, the page's measurements of how the
    answer was given, are stored with a new vote in the same transaction (not on a replay).
    """
    if reference_frame is not None and reference_frame not in REFERENCE_FRAMES:
        raise VoteError(422, "The reference frame must be intrinsic, relative or both.")
    if duration_ms is not None and not 0 <= duration_ms <= 24 * 3600 * 1000:
        duration_ms = None  # a client clock glitch is not worth refusing a vote for
    now = now or utcnow()
    worker_id = _worker_id(worker)
    try:
        outcome, state = _record_vote(
            session,
            worker,
            worker_id,
            assignment_id,
            value,
            strategy,
            reference_frame,
            duration_ms,
            now,
            study_id,
        )
        if signals is not None and outcome.created:
            store_signals(
                session,
                signal_values(signals, now, study_id, worker_id, vote_id=outcome.vote.id),
            )
        if then_next and outcome.batch_status == BatchStatus.open:
            active = (state.active_id, state.active_example_id) if state.active_id else None
            outcome.next = _advance(
                session, worker_id, state, outcome.done, active, strategy, now, display
            )
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return outcome


OTHER_STUDY = (
    "This item belongs to another study than the page you sent it to. Nothing was saved: "
    "please go back to the task through your study's own link."
)


def _record_vote(
    session: Session,
    worker: Worker | int,
    worker_id: int,
    assignment_id: int,
    value: bool,
    strategy: ExampleStrategy,
    reference_frame: str | None,
    duration_ms: int | None,
    now: datetime,
    study_id: int,
) -> tuple[VoteOutcome, Any]:
    """(the outcome, a row with the batch's state for the next item)."""
    statements = statements_for(dialect_of(session))
    if statements.vote_on_active is not None:
        fast = _vote_on_active(
            session,
            worker,
            worker_id,
            assignment_id,
            value,
            strategy,
            reference_frame,
            duration_ms,
            now,
            study_id,
        )
        if fast is not None:
            return fast
    params = {"q_lease": assignment_id}
    lease = run_prebuilt(session, statements.lock_lease, params).first()
    if lease is not None and lease.vote_id is None and lease.status == LeaseStatus.done:
        # A concurrent submit of this lease committed while this one waited for its lock:
        # PostgreSQL hands back the lease row as now committed but reads the joined vote and
        # batch from this statement's older snapshot. Read once more (a new statement, a new
        # snapshot under READ COMMITTED; the lock is already held) to reply as a replay.
        # Only on this rare turn: the common path keeps its one statement.
        lease = run_prebuilt(session, statements.lock_lease, params).first()
    if (
        lease is None
        or lease.worker_id != worker_id
        or lease.kind != strategy.kind
        or lease.example_id is None
    ):
        raise VoteError(404, "This item is not one of yours. Please reload the page.")
    if lease.batch_study != study_id:
        # Sent to another study's address: never a vote under that study's page (off the
        # hot path, whose one statement already asks for the request's study).
        raise VoteError(404, OTHER_STUDY)
    _unusable(lease.blocked)
    config = strategy.study(session, lease.batch_study)
    if lease.vote_id is not None:
        existing = RecordedVote(
            id=lease.vote_id,
            example_id=lease.example_id,
            worker_id=worker_id,
            value=lease.value,
            reference_frame=lease.reference_frame,
            duration_ms=lease.duration_ms,
            assignment_id=assignment_id,
            created_at=lease.created_at,
        )
        return VoteOutcome(
            existing, False, lease.done, lease.batch_size, lease.batch_status, lease.completion_code
        ), lease
    example_id = lease.example_id
    held = lease.status == LeaseStatus.active
    if not held:
        if lease.status not in (LeaseStatus.expired, LeaseStatus.released):
            raise VoteError(409, "This item was already answered. Please reload the page.")
        late_ok = run_prebuilt(
            session, statements.late_ok, {"q_id": example_id, **room_params(config)}
        ).first()
        if late_ok is None:
            raise VoteError(
                409,
                "The time for this item ran out and it went to someone else. "
                "Please reload the page for the next one.",
            )
    values = _vote_values(
        example_id, worker_id, value, reference_frame, duration_ms, assignment_id, now
    )
    vote_id, done, is_gold = _store_vote(session, values, held, lease.batch_id, config, now)
    return _after_vote(
        session, worker, worker_id, vote_id, values, done, is_gold, lease, strategy, config, now
    ), lease


def _vote_on_active(
    session: Session,
    worker: Worker | int,
    worker_id: int,
    assignment_id: int,
    value: bool,
    strategy: ExampleStrategy,
    reference_frame: str | None,
    duration_ms: int | None,
    now: datetime,
    study_id: int,
) -> tuple[VoteOutcome, Any] | None:
    """PostgreSQL, the common vote: the worker's own active lease in the request's study, in
    one statement (statements.vote_on_active). None when the lease is anything else; then
    nothing was written and the general path decides (a replay, a late vote, a refusal)."""
    statements = statements_for("postgresql")
    config = strategy.study(session, study_id)
    states = decision_states(config)
    row = run_prebuilt(
        session,
        statements.vote_on_active,
        {
            "q_lease": assignment_id,
            "q_worker": worker_id,
            "q_study": study_id,
            "q_value": value,
            "q_now": now,
            "v_reference_frame": reference_frame,
            "v_duration_ms": duration_ms,
            **states,
        },
    ).first()
    if row is None:
        return None
    if row.vote_id is not None:
        _settle(session, row, config, states)
    values = _vote_values(
        row.example_id, worker_id, value, reference_frame, duration_ms, assignment_id, now
    )
    return _after_vote(
        session,
        worker,
        worker_id,
        row.vote_id,
        values,
        row.done,
        bool(row.is_gold),
        row,
        strategy,
        config,
        now,
    ), row


def _vote_values(
    example_id: int,
    worker_id: int,
    value: bool,
    reference_frame: str | None,
    duration_ms: int | None,
    assignment_id: int,
    now: datetime,
) -> dict[str, Any]:
    """A new vote's columns (rules.VOTE_FIELDS), as both vote paths store and return them."""
    return {
        "example_id": example_id,
        "worker_id": worker_id,
        "value": value,
        "reference_frame": reference_frame,
        "duration_ms": duration_ms,
        "assignment_id": assignment_id,
        "created_at": now,
    }


def _after_vote(
    session: Session,
    worker: Worker | int,
    worker_id: int,
    vote_id: int | None,
    values: dict[str, Any],
    done: int,
    is_gold: bool,
    lease: Any,
    strategy: ExampleStrategy,
    config: StudyConfig,
    now: datetime,
) -> VoteOutcome:
    """What follows a stored vote: refuse a second judgement of the same Example, check a
    gold answer, complete the batch when this was its last item."""
    if vote_id is None:
        raise VoteError(409, "You have already judged this caption.")
    vote = RecordedVote(id=vote_id, **values)
    outcome = VoteOutcome(
        vote, True, done, lease.batch_size, lease.batch_status, lease.completion_code
    )
    if is_gold:
        who = worker if isinstance(worker, Worker) else session.get(Worker, worker_id)
        assert who is not None
        outcome.flagged = check_gold_accuracy(
            session, who, config, strategies={strategy.kind: strategy}, study_id=lease.batch_study
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
    return outcome


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

    On PostgreSQL one statement (then a second only for an Example with its own target); on
    SQLite the same steps one by one, counting first.
    """
    statements = statements_for(dialect_of(session))
    example_id = values["example_id"]
    count = {
        "q_id": example_id,
        "q_value": values["value"],
        "q_release": 1 if held else 0,
        **decision_states(config),
    }
    lease = {"q_lease": values["assignment_id"], "q_now": now, "q_batch": batch_id}
    if statements.write_vote is not None:
        params = {f"v_{name}": value for name, value in values.items()}
        row = run_prebuilt(session, statements.write_vote, {**count, **params, **lease}).one()
        vote_id, done = row.vote_id, int(row.done_count)
    else:
        row = run_prebuilt(session, statements.count_vote, count).one()
        vote_id = run_prebuilt(session, statements.insert_vote, values).scalar()
        run_prebuilt(session, leases.FINISH_LEASE, lease)
        done = int(run_prebuilt(session, leases.COUNT_DONE_ON_BATCH, lease).scalar_one())
    if vote_id is not None:
        _settle(session, row, config, count)
    return vote_id, done, bool(row.is_gold)


def _settle(session: Session, row: Any, config: StudyConfig, states: dict[str, Any]) -> None:
    """The counting UPDATE (``row``: what it returned) wrote the decision state from the
    study's table (rules.decision_states, made by decision_state); an Example with its own
    target, or counts beyond the table, get theirs from decision_state here, in a second
    statement."""
    table, width = states["q_states"], states["q_states_width"]
    if row.target_votes is None and row.queue_votes < width:
        settled, still_open = DECISION_OF_CHAR[table[row.queue_votes * width + row.queue_agree]]
    else:
        target = row.target_votes or config.votes_per_example
        settled, still_open = decision_state(row.queue_agree, row.queue_votes, target, config)
    if (settled, still_open) != (row.queue_settled, row.queue_open):
        run_prebuilt(
            session,
            statements_for(dialect_of(session)).set_state,
            {"q_id": row.counted_id, "q_settled": settled, "q_open": still_open},
        )
