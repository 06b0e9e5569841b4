"""What admins change from the dashboard: block/unblock workers, gold marks, re-queueing.

Each function does its whole change in the caller's transaction and commits once, so a
failure leaves nothing half-written; the audit trail's record of the change (who, what,
before and after) is added to the same transaction. The log names the acting admin's id,
never a reason typed by the admin.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, true
from sqlmodel import Session, col, select

from vsr_core import audit, standing
from vsr_core.audit import Actor
from vsr_core.models import (
    Adjudication,
    Assignment,
    AuditKind,
    Batch,
    Example,
    LeaseStatus,
    Vote,
    Worker,
)
from webapp.crowd import workers

log = logging.getLogger(__name__)


def block_in_study(
    session: Session,
    worker: Worker,
    reason: str | None,
    strategies: Mapping[str, Any],
    *,
    actor: Actor,
    study_id: int,
) -> int:
    """Block the worker in this study only (their work elsewhere goes on) and hand their
    leased items of this study back; returns leases released. Recorded, commits once."""
    before = standing.standing(session, worker, study_id)
    audit.record(
        session,
        actor,
        AuditKind.worker_block,
        study_id=study_id,
        target=f"worker {worker.id}",
        change={
            **audit.changed({"blocked": before.blocked}, {"blocked": True}),
            "reason": reason or None,
            "scope": "study",
        },
    )
    return workers.block_worker(session, worker, strategies, reason, study_id=study_id)


def unblock_in_study(session: Session, worker: Worker, *, actor: Actor, study_id: int) -> None:
    """Lift this study's block; a block in every study stays (a separate act)."""
    before = standing.standing(session, worker, study_id)
    standing.set_blocked(session, worker, study_id, False)
    audit.record(
        session,
        actor,
        AuditKind.worker_unblock,
        study_id=study_id,
        target=f"worker {worker.id}",
        change={
            **audit.changed(
                {"blocked": before.blocked, "block_reason": before.block_reason},
                {"blocked": worker.blocked, "block_reason": None},
            ),
            "scope": "study",
        },
    )
    session.commit()
    log.info("admin %s unblocked worker %s in study %s", actor.admin_id, worker.id, study_id)


def set_everywhere(
    session: Session,
    worker: Worker,
    blocked: bool,
    reason: str | None,
    strategies: Mapping[str, Any],
    *,
    actor: Actor,
    studies: list[int],
) -> int:
    """Block (or unblock) the worker in every study at once: the site-wide act, for an admin
    who owns every study (the route checks). Recorded in the trail of each study in
    ``studies`` (where the worker took part), so each study's owners see it. Commits."""
    for study_id in studies:
        audit.record(
            session,
            actor,
            AuditKind.worker_block if blocked else AuditKind.worker_unblock,
            study_id=study_id,
            target=f"worker {worker.id}",
            change={
                **audit.changed({"blocked": worker.blocked}, {"blocked": blocked}),
                "reason": reason or None,
                "scope": "every study",
            },
        )
    if blocked:
        return workers.block_worker(session, worker, strategies, reason, study_id=None)
    worker.blocked = False
    session.add(worker)
    session.commit()
    return 0


def set_flag(
    session: Session,
    worker: Worker,
    flagged: bool,
    reason: str | None,
    *,
    actor: Actor,
    study_id: int,
) -> None:
    """Flag or unflag the worker in this study only, with this study's reason."""
    before = standing.standing(session, worker, study_id)
    standing.set_flagged(session, worker, study_id, flagged, reason)
    after = {"flagged": flagged, "reason": (reason or "")[:500] or None if flagged else None}
    audit.record(
        session,
        actor,
        AuditKind.worker_flag,
        study_id=study_id,
        target=f"worker {worker.id}",
        change=audit.changed({"flagged": before.flagged, "reason": before.flag_reason}, after),
    )
    session.commit()
    log.info(
        "admin %s %s worker %s in study %s",
        actor.admin_id,
        "flagged" if flagged else "unflagged",
        worker.id,
        study_id,
    )


def set_gold(
    session: Session,
    example: Example,
    gold: bool,
    gold_label: bool | None,
    *,
    actor: Actor,
) -> None:
    """Mark or unmark an Example as gold. Commits.

    The validation queue counts active leases only on regular Examples (gold ones are shared
    by every validator), so the lease count switches with the flag: to 0 when marked, to the
    leases still out when unmarked (they are counted down as they end). The row is locked
    first, as the queue changes these counters in concurrent transactions.
    """
    from webapp.crowd import leases as lease_mod

    stmt = select(Example).where(Example.id == example.id).execution_options(populate_existing=True)
    session.exec(lease_mod.lock_row_wait(stmt, session)).one()
    before = {"gold": example.is_gold, "gold_label": example.gold_label}
    example.is_gold = gold
    example.gold_label = (example.label if gold_label is None else gold_label) if gold else None
    active = session.exec(
        select(func.count())
        .select_from(Assignment)
        .where(Assignment.example_id == example.id, Assignment.status == LeaseStatus.active)
    ).one()
    example.queue_leases = 0 if gold else int(active)
    session.add(example)
    audit.record(
        session,
        actor,
        AuditKind.gold_mark,
        study_id=example.study_id,
        target=f"example {example.id}",
        change=audit.changed(before, {"gold": gold, "gold_label": example.gold_label}),
    )
    session.commit()
    log.info(
        "admin %s set Example %s of study %s gold=%s label=%s",
        actor.admin_id,
        example.id,
        example.study_id,
        gold,
        example.gold_label,
    )


def vote_count(session: Session, example_id: int) -> int:
    stmt = select(func.count()).select_from(Vote).where(Vote.example_id == example_id)
    return int(session.exec(stmt).one())


class NotVotableError(ValueError):
    """The validation queue does not serve Examples of this origin."""


def requeue(
    session: Session,
    example: Example,
    extra_votes: int,
    config: Any,
    *,
    actor: Actor,
) -> int:
    """Ask for ``extra_votes`` more votes on this Example; returns its new vote target.

    The target is the Example's own ``target_votes`` override; its queue state is then
    re-derived by the validation queue's own rule, so it is served again.
    """
    from webapp.validate import rules as validation_rules

    if session.get(Adjudication, example.id) is not None:
        raise NotVotableError(
            f"Example #{example.id} is adjudicated, so votes no longer decide it: "
            "withdraw the adjudication first to ask for more votes"
        )
    if example.origin not in validation_rules.VOTABLE_ORIGINS:
        raise NotVotableError(
            f"{example.origin} Examples are not served to validators in this study, "
            "so they cannot be re-queued"
        )
    assert example.id is not None
    have = vote_count(session, example.id)
    was = example.target_votes or config.votes_per_example
    target = max(have, example.target_votes or config.votes_per_example) + extra_votes
    example.target_votes = target
    example.queue_settled, example.queue_open = validation_rules.decision_state(
        example.queue_agree, example.queue_votes, target, config
    )
    session.add(example)
    audit.record(
        session,
        actor,
        AuditKind.requeue,
        study_id=example.study_id,
        target=f"example {example.id}",
        change={
            "before": {"target_votes": was},
            "after": {"target_votes": target},
            "extra_votes": extra_votes,
            "votes_so_far": have,
        },
    )
    session.commit()
    log.info(
        "admin %s re-queued Example %s of study %s for %s votes",
        actor.admin_id,
        example.id,
        example.study_id,
        target,
    )
    return target


def open_batches(session: Session, worker_id: int, study_id: int | None = None) -> list[Batch]:
    """The worker's latest batches (of one study, when given)."""
    mine = Batch.study_id == study_id if study_id is not None else true()
    return list(
        session.exec(
            select(Batch)
            .where(Batch.worker_id == worker_id, mine)
            .order_by(col(Batch.created_at).desc())
            .limit(50)
        )
    )
