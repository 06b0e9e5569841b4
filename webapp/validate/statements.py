"""The queue's SQL, built once per dialect with bind parameters and run on the session's
connection: candidate Examples for a validator, and the hot path's prebuilt statements."""

from __future__ import annotations

import functools
from dataclasses import dataclass
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
    literal_column,
    or_,
    true,
    update,
)
from sqlalchemy import select as sa_select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col, select

from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Assignment,
    Batch,
    BatchKind,
    BatchStatus,
    Example,
    ExampleOrigin,
    LeaseStatus,
    Vote,
)
from vsr_core.standing import blocked_clause
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import ASSIGNMENT, BATCH, EXAMPLE, VOTE, WORKER
from vsr_core.types import UTCDateTime
from webapp.crowd import leases
from webapp.validate import driver
from webapp.validate.rules import (
    VOTABLE_ORIGINS,
    VOTE_FIELDS,
    VOTE_TYPES,
    WORKER_PARAM,
    decided_columns,
    has_room,
    room_params,
)


def dialect_of(session: Session) -> str:
    return session.get_bind().dialect.name


def run_prebuilt(session: Session, stmt: Any, params: dict[str, Any]) -> Any:
    """Run a prebuilt Core statement on the session's connection (same transaction).

    ``session.execute`` would treat an UPDATE of a mapped table as an ORM bulk update (and
    synchronise matching objects in the identity map), which costs more CPU than the
    statement itself on the hot path. Pending ORM changes are flushed first, as autoflush
    would. Example rows changed this way are not refreshed in the session; the hot path does
    not load them as objects. On PostgreSQL the statement runs straight on psycopg's cursor
    (webapp.validate.driver, why there).
    """
    if session.new or session.dirty or session.deleted:
        session.flush()
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        return driver.execute(connection, stmt, params)
    return connection.execute(stmt, params)


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


# 1: the other half of the previous batch's last item is kept from a new batch's first item;
# 0: it is not (the retry when nothing else can be served).
BOUNDARY_PARAM = bindparam("q_boundary", type_=Integer)


# 1: machine negatives alternate with other items in a batch (see _machine_negatives_apart);
# 0: no preference (the retry).
MIX_PARAM = bindparam("q_mix", type_=Integer)


def sibling_params(across_boundary: bool = True) -> dict[str, int]:
    """The candidate statements' parameter for the batch-boundary half of the sibling rule."""
    return {"q_boundary": int(across_boundary)}


def _batch_back(worker: Any, offset: int) -> Any:
    """The worker's validation batch ``offset`` back from the newest (0: the current one)."""
    return (
        sa_select(BATCH.c.id)
        .where(BATCH.c.worker_id == worker, BATCH.c.kind == BatchKind.validate.value)
        .order_by(BATCH.c.id.desc())
        .limit(1)
        .offset(offset)
        .scalar_subquery()
    )


MACHINE_ORIGIN: Any = literal_column(f"'{ExampleOrigin.adversarial.value}'")


def _machine_negatives_apart(worker: Any) -> list[Any]:
    """Conditions that keep machine negatives (``vsr match``'s distractors, origin
    adversarial) from looking machine-made to a validator.

    A query's distractors are False captions on the query's photo with its subject and
    object: two of them in one batch, or one next to the query, show which captions belong
    together. So a batch never holds two Examples on one photo when either is a machine
    negative. And with ``MIX_PARAM`` 1 they alternate with the other items: first in a
    batch and after a machine negative the next item is not one, after anything else it is
    one; the caller retries with 0 when that finds nothing, so the rule only orders what is
    there.

    Every subquery is uncorrelated, read once per statement (a hashed ``NOT IN``, an
    InitPlan) from the current batch's leases. They are in their own variant of the
    candidate statements, used while the study has a machine negative open
    (``ExampleStrategy.machines_open``): each filter of the walk lowers the planner's
    estimate of how many rows it keeps, and with these five the plan reads and sorts every
    open Example instead of walking ix_example_open to the first free one, a cost a study
    with no machine negative need not pay.
    """
    current = _batch_back(worker, 0)
    machine = col(Example.origin) == MACHINE_ORIGIN
    leased = ASSIGNMENT.alias("batch_lease")
    item = EXAMPLE.alias("batch_item")
    batch_items = leased.join(item, item.c.id == leased.c.example_id)
    photos = sa_select(item.c.image_id).select_from(batch_items).where(leased.c.batch_id == current)
    machine_photos = photos.where(item.c.origin == MACHINE_ORIGIN)
    newest = ASSIGNMENT.alias("mix_newest_lease")
    newest_item = EXAMPLE.alias("mix_newest_item")
    newest_id = sa_select(func.max(newest.c.id)).where(newest.c.batch_id == current)
    newest_origin = (
        sa_select(newest_item.c.origin)
        .select_from(ASSIGNMENT.join(newest_item, newest_item.c.id == ASSIGNMENT.c.example_id))
        .where(ASSIGNMENT.c.id == newest_id.scalar_subquery())
        .scalar_subquery()
    )
    # Whether the next item must not be a machine negative (else: must be one); a batch
    # opens with another item, as after a machine negative. No row: no preference.
    not_machine_next = sa_select(
        func.coalesce(newest_origin, MACHINE_ORIGIN) == MACHINE_ORIGIN
    ).where(MIX_PARAM == 1)
    return [
        or_(~machine, col(Example.image_id).not_in(photos)),
        col(Example.image_id).not_in(machine_photos),
        machine.not_in(not_machine_next),
    ]


def _no_sibling_nearby(worker: Any) -> Any:
    """Condition: the other Example of the same annotation (the same caption on its other
    image) was not leased to this validator in their current validation batch, nor, for the
    batch's first item, as the last item of their previous one.

    The two Examples of one caption have opposite labels, so seeing both in one batch or back
    to back across a batch boundary tells the validator that one is True and the other False.
    Only the previous batch's last lease counts, and only until the current batch has an
    item: a validator whose last batch held one half of every caption gets every other half
    in the next (blocking one of them for the whole batch left it for a third batch). Part of
    the candidate query, so both backends apply it with no extra statement; the batch ids and
    the previous batch's last lease are uncorrelated subqueries (evaluated once, by the
    (batch_id, id) index), and each candidate's sibling is read by ix_example_annotation_id
    and ix_assignment_worker_example.

    The boundary half of the rule yields when it is all that stands in the way
    (``BOUNDARY_PARAM`` 0, see ``sibling_params``): a validator whose only item left is the
    other half of their last one gets it in their next batch, rather than no batch at all.
    """
    sibling = EXAMPLE.alias("sibling")
    lease = ASSIGNMENT.alias("sibling_lease")
    last_of_previous = ASSIGNMENT.alias("previous_batch_lease")

    def batch_back(offset: int) -> Any:
        return _batch_back(worker, offset)

    in_current = ASSIGNMENT.alias("current_batch_lease")
    # Only for the current batch's first item: later items already sit between them.
    current_is_empty = ~sa_select(literal(1)).where(in_current.c.batch_id == batch_back(0)).exists()
    previous_last_lease = (
        sa_select(func.max(last_of_previous.c.id))
        .where(
            last_of_previous.c.batch_id == batch_back(1),
            current_is_empty,
            literal(1) == BOUNDARY_PARAM,
        )
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
class Statements:
    regular: Any
    regular_machines: Any  # with _machine_negatives_apart
    servable: Any
    open_floor: Any
    gold: Any
    lease_taken: Any
    lease_returned: Any
    lock_lease: Any
    batch_state: Any
    lease_regular: Any  # PostgreSQL only
    lease_regular_machines: Any  # PostgreSQL only, with _machine_negatives_apart
    write_vote: Any  # PostgreSQL only
    vote_on_active: Any  # PostgreSQL only
    late_ok: Any
    count_vote: Any
    insert_vote: Any
    set_state: Any


def batch_columns(exclude_lease: Any = None, batch: Any = BATCH) -> list[Any]:
    """The batch's state in one row: its own columns (with the done count it keeps) and its
    active lease, if the newest lease (other than ``exclude_lease``) is one. Constant work
    however far the batch has got: one step down ix_assignment_batch_lease.

    Only the newest lease is looked at: leases are taken one at a time, so an older one
    still active was left behind in another tab, and it expires like any other.
    """
    newest = ASSIGNMENT.alias("newest_lease")
    where = [newest.c.batch_id == batch.c.id]
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
        batch.c.id.label("batch_id"),
        batch.c.study_id.label("batch_study"),
        batch.c.status.label("batch_status"),
        batch.c.size.label("batch_size"),
        batch.c.deadline.label("batch_deadline"),
        batch.c.completion_code.label("completion_code"),
        batch.c.done_count.label("done"),
        if_active(newest.c.id).label("active_id"),
        if_active(newest.c.example_id).label("active_example_id"),
    ]


# The study whose Examples a statement may serve (a validator's batch belongs to one study;
# ix_example_open is (study_id, id), so other studies' open Examples are never walked).
STUDY_PARAM = bindparam("q_study", type_=Integer)


@functools.cache
def statements_for(dialect: str) -> Statements:
    postgres = dialect == "postgresql"
    example_id = bindparam("q_id", type_=Integer)
    open_non_gold = (col(Example.queue_open) == true(), col(Example.is_gold) == false())
    floor = bindparam("q_floor", type_=Integer)
    # At or above the floor: the walk of ix_example_open (study_id, id) starts there. Decided
    # Examples below it leave index entries behind until VACUUM, and while any transaction
    # on the server is older than the votes that closed them (an import, an export, a long
    # report in any database) they cannot even be marked dead: walking from the study's
    # first entry read ~4,000 buffers per lease after a bench run, against ~100 from the
    # floor (bench/load/explain.py). On PostgreSQL the hot path runs generic plans (an
    # inequality on a parameter gets a default share), and with the votable origins in the
    # index's predicate the plan made for the values walks it too
    # (tests/webapp/validate/test_queue_plan.py, at 10x and 100x shapes).
    at_floor = col(Example.id) >= floor
    # The origins are the code's own constants, written into the SQL: an IN list of bind
    # parameters is expanded anew on every execution (Python CPU), and PostgreSQL cannot
    # estimate it in a generic plan (see lease_regular).
    votable = col(Example.origin).in_([literal_column(f"'{o}'") for o in VOTABLE_ORIGINS])
    unseen = (
        col(Example.study_id) == STUDY_PARAM,
        *open_non_gold,
        at_floor,
        votable,
        has_room(),
        *_not_seen_by(WORKER_PARAM, floor),
    )
    candidates = (
        select(Example.id)
        .where(*unseen, _no_sibling_nearby(WORKER_PARAM))
        .order_by(col(Example.id))
    )
    candidates_machines = candidates.where(*_machine_negatives_apart(WORKER_PARAM))
    regular = candidates.limit(bindparam("q_limit", type_=Integer))
    regular_machines = candidates_machines.limit(bindparam("q_limit", type_=Integer))
    # What a new batch could hold (read without locking, once per batch): the unseen open
    # Examples with their caption, since a batch holds one half of a caption at most.
    servable = (
        select(Example.id, Example.annotation_id, Example.image_id, Example.origin)
        .where(*unseen)
        .order_by(col(Example.id))
        .limit(bindparam("q_limit", type_=Integer))
    )
    # Gold rows are shared by every validator and their counters are not touched, so they
    # are read without a lock; random order so validators do not all meet the same one first.
    gold = (
        select(Example.id)
        .where(
            col(Example.study_id) == STUDY_PARAM,
            col(Example.is_gold) == true(),
            col(Example.gold_label).is_not(None),
            *_not_seen_by(WORKER_PARAM),
        )
        .order_by(func.random())
        .limit(bindparam("q_limit", type_=Integer))
    )
    lease_param = bindparam("q_lease", type_=Integer)
    # One statement per request for who and where: the lease (locked: two submits of one
    # lease serialise here), its worker's block (everywhere or in the batch's study), its
    # batch with the leases done and any other active lease, and a vote already stored for
    # it (an idempotent replay).
    lock_lease = (
        sa_select(
            ASSIGNMENT.c.worker_id,
            ASSIGNMENT.c.kind,
            ASSIGNMENT.c.status,
            ASSIGNMENT.c.example_id,
            blocked_clause(ASSIGNMENT.c.worker_id, BATCH.c.study_id).label("blocked"),
            *batch_columns(exclude_lease=ASSIGNMENT.c.id),
            VOTE.c.id.label("vote_id"),
            VOTE.c.value,
            VOTE.c.reference_frame,
            VOTE.c.duration_ms,
            VOTE.c.created_at,
        )
        .select_from(
            ASSIGNMENT.join(BATCH, BATCH.c.id == ASSIGNMENT.c.batch_id).outerjoin(
                VOTE, VOTE.c.assignment_id == ASSIGNMENT.c.id
            )
        )
        .where(ASSIGNMENT.c.id == lease_param)
    )
    # The worker (None: unknown) and their open batch of this kind, if any, in one row.
    batch_state = (
        sa_select(
            blocked_clause(WORKER.c.id, STUDY_PARAM, WORKER.c.blocked).label("blocked"),
            *batch_columns(),
        )
        .select_from(
            WORKER.outerjoin(
                BATCH,
                and_(
                    BATCH.c.worker_id == WORKER.c.id,
                    BATCH.c.study_id == STUDY_PARAM,
                    BATCH.c.kind == BatchKind.validate.value,
                    BATCH.c.status == BatchStatus.open.value,
                ),
            )
        )
        .where(WORKER.c.id == WORKER_PARAM)
        .order_by(BATCH.c.id.desc())
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
        regular_machines = regular_machines.with_for_update(skip_locked=True)
        lock_lease = lock_lease.with_for_update(of=ASSIGNMENT)
        late_ok = late_ok.with_for_update()
    value = bindparam("q_value", type_=Boolean)
    release = bindparam("q_release", type_=Integer)
    count_vote = _count_vote(col(Example.id) == example_id, value, release)
    # ON CONFLICT DO NOTHING instead of a savepoint: a clash with uq_vote_example_worker (the
    # same validator, another lease of this Example) returns no row. Both backends have it.
    insert = pg_insert if postgres else sqlite_insert
    insert_vote = insert(Vote).on_conflict_do_nothing().returning(col(Vote.id))
    lease_regular = lease_regular_machines = write_vote = vote_on_active = None
    if postgres:
        lease_regular = _lease_regular(candidates)
        lease_regular_machines = _lease_regular(candidates_machines)
        write_vote = _write_vote(count_vote)
        vote_on_active = _vote_on_active(value)
    return Statements(
        regular=regular,
        regular_machines=regular_machines,
        servable=servable,
        lease_regular=lease_regular,
        lease_regular_machines=lease_regular_machines,
        write_vote=write_vote,
        vote_on_active=vote_on_active,
        # The lowest open Example id the queue may serve, and whether a machine negative is
        # open (then the queue mixes them in), in one statement; both read ix_example_open,
        # whose predicate names the votable origins.
        open_floor=sa_select(
            sa_select(func.min(col(Example.id)))
            .where(col(Example.study_id) == STUDY_PARAM, *open_non_gold, votable)
            .scalar_subquery()
            .label("floor"),
            sa_select(literal(1))
            .where(
                col(Example.study_id) == STUDY_PARAM,
                *open_non_gold,
                col(Example.origin) == MACHINE_ORIGIN,
            )
            .exists()
            .label("machine"),
        ),
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
    session: Session,
    worker_id: int,
    config: StudyConfig,
    limit: int,
    floor: int = 0,
    study_id: int = DEFAULT_STUDY_ID,
    machines: bool = False,
) -> list[int]:
    """The next regular items for the worker; when none, those the preference rules alone
    held back (``candidate_attempts``)."""
    params = {
        "q_worker": worker_id,
        "q_limit": limit,
        "q_floor": floor,
        "q_study": study_id,
        **room_params(config),
    }
    prebuilt = statements_for(dialect_of(session))
    stmt = prebuilt.regular_machines if machines else prebuilt.regular
    for attempt in candidate_attempts(machines):
        rows = run_prebuilt(session, stmt, params | attempt).scalars()
        found = [i for i in rows if i is not None]
        if found:
            return found
    return []


def candidate_attempts(machines: bool) -> list[dict[str, int]]:
    """The candidate statement's parameters to try in turn: every rule, then without those
    that yield when nothing else can be served, one by one: the mixing of machine negatives
    with other items (``_machine_negatives_apart``, in the statements for a study with one
    open, ``machines``), then the batch-boundary half of the sibling rule
    (``_no_sibling_nearby``)."""
    if not machines:
        return [sibling_params(True), sibling_params(False)]
    return [
        sibling_params(True) | {"q_mix": 1},
        sibling_params(True) | {"q_mix": 0},
        sibling_params(False) | {"q_mix": 0},
    ]


def servable_count(
    session: Session,
    worker_id: int,
    config: StudyConfig,
    limit: int,
    study_id: int = DEFAULT_STUDY_ID,
) -> int:
    """How many regular items (up to ``limit``) one new validation batch of this worker can
    hold: the open Examples they have not seen, each caption counted once (its two halves
    never share a batch), machine negatives once per photo (_machine_negatives_apart).
    Called with the new, still empty batch in place."""
    params = {
        "q_worker": worker_id,
        "q_limit": 2 * limit,
        "q_floor": 0,
        "q_study": study_id,
        **room_params(config),
    }
    rows = run_prebuilt(session, statements_for(dialect_of(session)).servable, params).all()
    captions = {
        ("photo", r.image_id)
        if r.origin == ExampleOrigin.adversarial.value
        else ("caption", r.annotation_id)
        if r.annotation_id is not None
        else ("example", r.id)
        for r in rows
    }
    return min(limit, len(captions))


def gold_candidates(
    session: Session, worker_id: int, limit: int, study_id: int = DEFAULT_STUDY_ID
) -> list[int]:
    params = {"q_worker": worker_id, "q_limit": limit, "q_study": study_id}
    rows = run_prebuilt(session, statements_for(dialect_of(session)).gold, params).scalars()
    return [i for i in rows if i is not None]


# PostgreSQL: one statement each for the two halves of a round trip (data-modifying CTEs):
# find, lock, count and lease the next regular item; store the vote, finish the lease and count
# it on the batch. SQLite runs the same steps one by one.


def _count_vote(where: Any, value: Any, release: Any) -> Any:
    """Count a vote on its Example (and free its lease, unless gold); RETURNING gives the row
    as written: the new counts and decision state (rules.decided_columns)."""
    agrees = case((col(Example.label) == value, 1), else_=0)
    return (
        update(Example)
        .where(where)
        .values(
            queue_votes=col(Example.queue_votes) + 1,
            queue_agree=col(Example.queue_agree) + agrees,
            queue_leases=col(Example.queue_leases)
            - case((col(Example.is_gold) == true(), 0), else_=release),
            **decided_columns(col(Example.queue_votes) + 1, col(Example.queue_agree) + agrees),
        )
        .returning(
            col(Example.id).label("counted_id"),
            col(Example.queue_votes),
            col(Example.queue_agree),
            col(Example.target_votes),
            col(Example.is_gold),
            col(Example.queue_settled),
            col(Example.queue_open),
        )
    )


def _lease_regular(candidates: Any) -> Any:
    """Find, lock, count and lease the next regular item.

    LIMIT 1 in the SQL, not a parameter: the API pool has PostgreSQL reuse one generic plan
    per prepared statement (vsr_core.db.GENERIC_PLANS), and a generic plan for LIMIT $n is
    costed as if a tenth of the candidates were wanted. With the limit and the origins in the
    SQL it is the same ordered walk of ix_example_open as a plan made for the values
    (tests/webapp/validate/test_queue_plan.py).
    """
    cand = candidates.limit(literal_column("1")).with_for_update(skip_locked=True).cte("cand")
    taken = (
        update(Example)
        .where(col(Example.id).in_(sa_select(cand.c.id)))
        .values(queue_leases=col(Example.queue_leases) + 1)
        .returning(col(Example.id))
        .cte("taken")
    )
    lease_regular = (
        pg_insert(Assignment)
        .from_select(
            [
                "batch_id",
                "worker_id",
                "kind",
                "example_id",
                "status",
                "leased_at",
                "lease_expires_at",
            ],
            sa_select(
                bindparam("q_batch", type_=Integer),
                WORKER_PARAM,
                literal(BatchKind.validate.value),
                cand.c.id,
                literal(LeaseStatus.active.value),
                bindparam("q_now", type_=UTCDateTime()),
                bindparam("q_expires", type_=UTCDateTime()),
            ).select_from(cand),
        )
        .returning(col(Assignment.id), col(Assignment.example_id))
        .add_cte(taken)
    )
    return lease_regular


def _stored_vote(counted_example: Any, columns: dict[str, Any]) -> Any:
    """CTE: the vote inserted from the counting UPDATE's row (``columns``: an expression for
    each of rules.VOTE_FIELDS), none when this validator already judged the Example."""
    return (
        pg_insert(Vote)
        .from_select(
            list(VOTE_FIELDS),
            sa_select(*(columns[name] for name in VOTE_FIELDS)).select_from(counted_example),
        )
        .on_conflict_do_nothing()
        .returning(col(Vote.id))
        .cte("stored")
    )


def _write_vote(count_vote: Any) -> Any:
    """Store the vote of a lease already locked (``lock_lease``), finish the lease and count
    it on the batch.

    The vote is inserted from the counting UPDATE's row, a data dependency: the Example is
    locked and counted before the vote takes its id, so votes of one Example get ids in the
    order they were counted.
    """
    counted_example = count_vote.cte("counted_example")
    finished = leases.FINISH_LEASE.returning(col(Assignment.id)).cte("finished")
    counted = leases.COUNT_DONE_ON_BATCH.cte("counted")
    # "v_" names: an UPDATE in the same statement would take execution parameters named
    # like its table's columns (worker_id, ...) as values to SET.
    stored = _stored_vote(
        counted_example,
        {name: bindparam(f"v_{name}", type_=VOTE_TYPES.get(name)) for name in VOTE_FIELDS},
    )
    write_vote = (
        sa_select(*counted_example.c, counted.c.done_count, stored.c.id.label("vote_id"))
        .select_from(counted_example.join(counted, true()).outerjoin(stored, true()))
        .add_cte(finished)
    )
    return write_vote


def _vote_on_active(value: Any) -> Any:
    """The common vote in one statement, with no ``lock_lease`` before it: finish the
    worker's own active validation lease of an Example in the request's study (the worker
    not blocked), count the vote on the Example, store it, count it on the batch, and return
    what ``lock_lease`` and ``write_vote`` return together.

    The lease is finished first and the rest is keyed on it, so it is locked before its
    Example, as on every other path. When the lease is anything else (not this worker's, not
    active, already voted, another study; a second submit of the same lease waits for the
    first and then finds it done) nothing matches, nothing is written and no row comes back:
    the caller takes the general path (``lock_lease``, then ``write_vote`` or a replay or a
    refusal).
    """
    lease_id = bindparam("q_lease", type_=Integer)
    now = bindparam("q_now", type_=UTCDateTime())
    in_study = sa_select(BATCH.c.id).where(BATCH.c.study_id == STUDY_PARAM)
    finished = (
        update(Assignment)
        .where(
            col(Assignment.id) == lease_id,
            col(Assignment.worker_id) == WORKER_PARAM,
            col(Assignment.kind) == literal_column(f"'{BatchKind.validate.value}'"),
            col(Assignment.status) == literal_column(f"'{LeaseStatus.active.value}'"),
            col(Assignment.example_id).is_not(None),
            col(Assignment.batch_id).in_(in_study),
            ~blocked_clause(WORKER_PARAM, STUDY_PARAM),
        )
        .values(status=LeaseStatus.done.value, finished_at=now)
        .returning(col(Assignment.batch_id), col(Assignment.example_id))
        .cte("finished")
    )
    counted_example = _count_vote(
        col(Example.id) == sa_select(finished.c.example_id).scalar_subquery(),
        value,
        literal(1),
    ).cte("counted_example")
    counted = (
        update(Batch)
        .where(col(Batch.id) == sa_select(finished.c.batch_id).scalar_subquery())
        .values(done_count=col(Batch.done_count) + 1)
        .returning(
            *(
                BATCH.c[name]
                for name in (
                    "id",
                    "study_id",
                    "status",
                    "size",
                    "deadline",
                    "completion_code",
                    "done_count",
                )
            )
        )
        .cte("counted")
    )
    stored = _stored_vote(
        counted_example,
        {
            "example_id": counted_example.c.counted_id,
            "worker_id": WORKER_PARAM,
            "value": value,
            "assignment_id": lease_id,
            "created_at": now,
            # "v_" names, as in _write_vote
            "reference_frame": bindparam("v_reference_frame", type_=String),
            "duration_ms": bindparam("v_duration_ms", type_=Integer),
        },
    )
    return sa_select(
        *counted_example.c,
        *batch_columns(exclude_lease=lease_id, batch=counted),
        finished.c.example_id,
        stored.c.id.label("vote_id"),
    ).select_from(
        finished.join(counted_example, true()).join(counted, true()).outerjoin(stored, true())
    )
