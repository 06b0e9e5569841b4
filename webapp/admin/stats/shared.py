"""What every dashboard page's figures stand on: the tables, the study's members, per-Example
vote counts and agreement (with the keep rule of ``vsr_core.kept``), the labels workers are
named by, and the cache key of the figures."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, and_, case, exists, func, or_, select, true
from sqlalchemy.sql import Subquery
from sqlmodel import Session

from vsr_core.kept import kept_clause
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Annotation,
    Assignment,
    Batch,
    Example,
    ImagePair,
    InviteToken,
    Job,
    McItem,
    Vote,
    Worker,
)
from vsr_core.study import StudyConfig

# Table objects (not the ORM classes): typed columns for SQL expressions.
ANN: Table = Annotation.__table__  # type: ignore[attr-defined]
ASG: Table = Assignment.__table__  # type: ignore[attr-defined]
BATCH: Table = Batch.__table__  # type: ignore[attr-defined]
EX: Table = Example.__table__  # type: ignore[attr-defined]
PAIR: Table = ImagePair.__table__  # type: ignore[attr-defined]
JOB: Table = Job.__table__  # type: ignore[attr-defined]
INVITE: Table = InviteToken.__table__  # type: ignore[attr-defined]
MC: Table = McItem.__table__  # type: ignore[attr-defined]
VOTE: Table = Vote.__table__  # type: ignore[attr-defined]
WORKER: Table = Worker.__table__  # type: ignore[attr-defined]

REVALIDATION = "revalidation"


def study_members(study_id: int) -> Any:
    """A condition on the worker table: the worker took part in the study (a batch, a
    caption, an Example, a vote or a redeemed invite in it; imported authors and validators
    have no batch). A worker may be a member of several studies. Correlated EXISTS probes
    on the per-worker indexes stop at the first hit, so the cost grows with the number of
    workers, not of votes."""
    w = WORKER.c.id
    # "study_id + 0": SQLite would otherwise walk the whole study by its study_id index for
    # every worker instead of the worker's own rows (on the VSR release: 0.4 ms instead of
    # 32; PostgreSQL 18 ms instead of 45, a UNION of ids 38).
    return or_(
        exists().where(BATCH.c.worker_id == w, BATCH.c.study_id + 0 == study_id),
        exists().where(VOTE.c.worker_id == w, EX.c.id == VOTE.c.example_id,
                       EX.c.study_id == study_id),
        exists().where(EX.c.author_id == w, EX.c.study_id + 0 == study_id),
        exists().where(ANN.c.worker_id == w, PAIR.c.id == ANN.c.pair_id,
                       PAIR.c.study_id == study_id),
        exists().where(INVITE.c.worker_id == w, INVITE.c.study_id == study_id),
    )


def vote_counts(example_ids: Any = None) -> Subquery:
    """Per Example: number of votes ``n`` and of True votes ``t`` (optionally only for the
    Examples in ``example_ids``, a subquery)."""
    stmt = select(
        VOTE.c.example_id.label("example_id"),
        func.count().label("n"),
        func.sum(case((VOTE.c.value.is_(True), 1), else_=0)).label("t"),
    )
    if example_ids is not None:
        stmt = stmt.where(VOTE.c.example_id.in_(example_ids))
    return stmt.group_by(VOTE.c.example_id).subquery("vc")


def example_agreement(
    cfg: StudyConfig, *, with_revalidation: bool = False, where: list[Any] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> Subquery:
    """Per Example: votes, votes agreeing with its label, and decided / kept / unanimous flags.

    An Example is decided once the validation queue is done with it (``queue_open`` false:
    the study's adaptive rule, webapp.validate.queue) and it has at least its target number
    of votes (its own override or the study default). Kept / rejected follow
    ``vsr_core.kept``: kept when a share >= keep_threshold of the votes so far agree with its
    label (2 of 3, 3 of 4, 4 of 6; a 1-1 tie fails), rejected when it has votes and fails,
    whether or not the queue still wants more (then the decision is provisional).
    Re-validation copies (vsr_core.revalidation) are left out unless ``with_revalidation``: they
    are a study of the imported data, not more data. ``where``: conditions on Example columns;
    only those Examples' votes are counted (at 10x VSR, grouping all 390,000 votes to show one
    relation's 14,000 Examples cost most of the data page's time).
    """
    where = [EX.c.study_id == study_id, *(where or ())]  # one study's Examples only
    # Votes and agreeing votes from the Example's own counters, not by grouping the vote
    # table: every vote is counted on its Example in the same statement that stores it
    # (webapp.validate.statements.count_vote; the importer sets them too), so they are equal
    # (webapp.validate.audit checks it), and reading them is one pass over the Examples. At
    # 10x VSR, grouping 390,000 votes cost the overview ~400 ms of its ~480.
    n = EX.c.queue_votes
    agree = EX.c.queue_agree
    t = case((EX.c.label.is_(True), agree), else_=n - agree)
    target = func.coalesce(EX.c.target_votes, cfg.votes_per_example)
    # Decided = the validation queue wants no more votes for it (its adaptive rule, kept on
    # the row; imported Examples arrive settled), and it has its target number of votes.
    decided = and_(EX.c.queue_open.is_(False), n >= target, n > 0)
    kept = kept_clause(agree, n, cfg.keep_threshold)
    return (
        select(
            EX.c.id.label("id"),
            EX.c.relation.label("relation"),
            EX.c.subj.label("subj"),
            EX.c.obj.label("obj"),
            EX.c.label.label("label"),
            EX.c.origin.label("origin"),
            EX.c.is_gold.label("is_gold"),
            n.label("n"),
            t.label("t"),
            agree.label("agree"),
            case((decided, 1), else_=0).label("decided"),
            case((kept, 1), else_=0).label("kept"),
            case((and_(n > 0, agree == n), 1), else_=0).label("unanimous"),
        )
        .select_from(EX)
        .where(true() if with_revalidation else EX.c.origin != REVALIDATION, *(where or ()))
        .subquery("ea")
    )


def data_version(session: Session) -> tuple[Any, ...]:
    """Cheap fingerprint of the tables behind the figures (cache key)."""
    conn = session.connection()
    row = conn.execute(
        select(
            select(func.count()).select_from(VOTE).scalar_subquery(),
            select(func.max(VOTE.c.id)).scalar_subquery(),
            select(func.count()).select_from(EX).scalar_subquery(),
            select(func.max(EX.c.id)).scalar_subquery(),
            select(func.count()).select_from(ANN).scalar_subquery(),
            select(func.count()).select_from(PAIR).scalar_subquery(),
            select(func.count()).select_from(EX).where(EX.c.is_gold.is_(True)).scalar_subquery(),
        )
    ).one()
    return tuple(row)


def invite_labels() -> Any:
    """(worker_id, label): the label of a worker's invite, the name the dashboard shows."""
    return (
        select(INVITE.c.worker_id.label("worker_id"), func.max(INVITE.c.label).label("label"))
        .where(INVITE.c.worker_id.is_not(None), INVITE.c.label != "")
        .group_by(INVITE.c.worker_id)
    )
