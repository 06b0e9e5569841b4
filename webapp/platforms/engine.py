"""Sync, plan and apply: what to approve, reject and pay, sent exactly once.

plan() only writes PlatformAction rows ('planned', deterministic idempotency keys, so planning
twice adds nothing); apply() commits 'sending' BEFORE each call and 'done'/'failed' after, so
a crash leaves at most one row per action in 'sending', which reconcile() settles on the next
run by asking the platform (approve/reject) or re-sending with the same idempotency token
(MTurk bonus). A Prolific bonus left 'sending' is never re-sent: it is marked failed for a
person to check, because Prolific's bonus API has no idempotency key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, func, select

from vsr_core.models import (
    Assignment,
    Example,
    LeaseStatus,
    PlatformAction,
    PlatformCall,
    PlatformStudy,
    PlatformSubmission,
    Vote,
    Worker,
)
from vsr_core.types import utcnow
from webapp.crowd import leases as lease_mod
from webapp.platforms.base import GONE, Platform, PlatformError
from webapp.validate.gold import gold_score

# Statuses that wait for our decision, and those that show a decision was already taken.
REVIEWABLE = frozenset({"AWAITING REVIEW", "Submitted"})
DECIDED = {"approve": {"APPROVED", "Approved"}, "reject": {"REJECTED", "Rejected"}}
CRASH_ENV = "VSR_PLATFORM_CRASH"  # tests only: os._exit at 'after_sending' or 'after_call'


@dataclass(frozen=True)
class Rules:
    min_gold_accuracy: float = 0.7
    min_gold_answers: int = 5
    min_items: int = 1
    bonus_cents_per_kept: int = 0
    reject_flagged: bool = True


class CallLog:
    """Collects every request and answer from a client (its ``log`` callback); ``save`` writes
    them as PlatformCall rows. Buffered because a second connection writing mid-call would wait
    on the engine's own open transaction (SQLite locks the whole file)."""

    def __init__(self, platform: str) -> None:
        self.platform = platform
        self.rows: list[PlatformCall] = []

    def __call__(self, method: str, path: str, body: Any, status: int | None, answer: Any,
                 err: str) -> None:
        self.rows.append(PlatformCall(platform=self.platform, method=method, path=path[:500],
                                      request=body, status=status, response=_small(answer),
                                      error=err[:500]))

    def save(self, session: Session) -> None:
        session.add_all(self.rows)
        session.commit()
        self.rows = []


def _small(answer: Any) -> Any:
    return answer if isinstance(answer, dict) and len(repr(answer)) < 20000 else {"truncated": 1}


def sync(
    session: Session, platform: Platform, study: PlatformStudy,
    strategies: Mapping[str, lease_mod.LeaseStrategy],
) -> int:
    """Store the platform's submissions; participants who are gone give their leases back
    at once. Returns how many leases were released."""
    released = 0
    for remote in platform.sync_submissions(study.external_id):
        row = session.exec(select(PlatformSubmission).where(
            PlatformSubmission.platform == platform.name,
            PlatformSubmission.external_id == remote.external_id,
        )).first() or PlatformSubmission(
            study_id=study.id or 0, platform=platform.name, external_id=remote.external_id,
            worker_external_id=remote.worker_external_id, status=remote.status,
        )
        worker = session.exec(select(Worker).where(
            Worker.source == platform.name, Worker.external_id == remote.worker_external_id
        )).first()
        row.status, row.synced_at = remote.status, utcnow()
        row.worker_id = worker.id if worker else None
        session.add(row)
        if worker is not None and remote.status in GONE:
            released += _release_leases(session, worker, strategies)
    study.synced_at = utcnow()
    session.add(study)
    session.commit()
    return released


def _release_leases(
    session: Session, worker: Worker, strategies: Mapping[str, lease_mod.LeaseStrategy]
) -> int:
    active = session.exec(select(Assignment).where(
        Assignment.worker_id == worker.id, Assignment.status == LeaseStatus.active
    )).all()
    n = 0
    for lease in active:
        strategy = strategies.get(lease.kind)
        if strategy is not None:
            lease_mod.release(session, lease, strategy)
            n += 1
    return n


def quality(session: Session, worker_id: int) -> dict[str, Any]:
    gold = gold_score(session, worker_id)
    votes = session.exec(select(func.count()).where(Vote.worker_id == worker_id)).one()
    kept = session.exec(select(func.count()).select_from(Example).where(
        Example.author_id == worker_id, col(Example.is_gold).is_(False)
    )).one()
    worker = session.get(Worker, worker_id)
    return {"gold_answered": gold.answered, "gold_accuracy": gold.accuracy,
            "items": int(votes) + int(kept), "kept_captions": int(kept),
            "flagged": bool(worker and worker.flagged)}


def _verdict(q: dict[str, Any], rules: Rules) -> str | None:
    """None when the work passes, else the reason to reject."""
    if rules.reject_flagged and q["flagged"]:
        return "answers flagged as too fast"
    acc = q["gold_accuracy"]
    if q["gold_answered"] >= rules.min_gold_answers and acc is not None \
            and acc < rules.min_gold_accuracy:
        return f"gold accuracy {acc:.0%} below {rules.min_gold_accuracy:.0%}"
    if q["items"] < rules.min_items:
        return f"{q['items']} items done, fewer than the {rules.min_items} required"
    return None


def key(study: PlatformStudy, kind: str, submission: str) -> str:
    return f"{study.platform}-{study.id}-{kind}-{submission}"[:128]


def plan(session: Session, study: PlatformStudy, rules: Rules) -> list[PlatformAction]:
    """Write the planned actions for reviewable submissions (none twice); returns the new ones."""
    added: list[PlatformAction] = []
    subs = session.exec(select(PlatformSubmission).where(
        PlatformSubmission.study_id == study.id, col(PlatformSubmission.status).in_(REVIEWABLE)
    )).all()
    for sub in subs:
        if sub.worker_id is None:
            q: dict[str, Any] = {"gold_answered": 0, "gold_accuracy": None, "items": 0,
                                 "kept_captions": 0, "flagged": False}
        else:
            q = quality(session, sub.worker_id)
        sub.quality = q
        session.add(sub)
        reason = _verdict(q, rules)
        wanted = [("reject", None, reason)] if reason else [("approve", None, "")]
        if not reason and rules.bonus_cents_per_kept and q["kept_captions"]:
            cents = rules.bonus_cents_per_kept * q["kept_captions"]
            wanted.append(("bonus", cents, f"{q['kept_captions']} kept captions"))
        for kind, cents, why in wanted:
            k = key(study, kind, sub.external_id)
            if session.exec(select(PlatformAction).where(PlatformAction.idempotency_key == k)
                            ).first():
                continue
            action = PlatformAction(study_id=study.id or 0, platform=study.platform, kind=kind,
                                    target=sub.external_id, amount_cents=cents,
                                    reason=why or "", idempotency_key=k)
            session.add(action)
            added.append(action)
    session.commit()
    return added


def _send(platform: Platform, study: PlatformStudy, action: PlatformAction,
          worker_external_id: str) -> dict[str, Any]:
    if action.kind == "approve":
        return platform.approve(action.target, action.idempotency_key)
    if action.kind == "reject":
        return platform.reject(action.target, action.reason, action.idempotency_key)
    if action.kind == "return":
        return platform.request_return(action.target, action.reason, action.idempotency_key)
    return platform.bonus(study.external_id, action.target, worker_external_id,
                          action.amount_cents or 0, action.reason, action.idempotency_key)


def _worker_ext(session: Session, action: PlatformAction) -> str:
    sub = session.exec(select(PlatformSubmission).where(
        PlatformSubmission.platform == action.platform,
        PlatformSubmission.external_id == action.target,
    )).first()
    return sub.worker_external_id if sub else ""


def reconcile(session: Session, platform: Platform, study: PlatformStudy) -> int:
    """Settle actions a crash left in 'sending'; returns how many were settled."""
    stuck = session.exec(select(PlatformAction).where(
        PlatformAction.study_id == study.id, PlatformAction.state == "sending"
    )).all()
    for action in stuck:
        if action.kind in DECIDED:
            status = platform.submission_status(action.target)
            if status in DECIDED[action.kind]:
                action.state, action.response = "done", {"reconciled": status}
            else:
                action.state = "planned"  # the call never arrived: send it again
        elif action.kind == "bonus" and platform.name == "mturk":
            action.state = "planned"  # same UniqueRequestToken: MTurk pays at most once
        else:
            action.state = "failed"
            action.response = {"reconcile": "unknown whether it was sent; check on the platform"}
        session.add(action)
    session.commit()
    return len(stuck)


def apply(session: Session, platform: Platform, study: PlatformStudy) -> dict[str, int]:
    """Send every planned action once; returns counts by final state."""
    reconcile(session, platform, study)
    counts = {"done": 0, "failed": 0}
    planned = session.exec(select(PlatformAction).where(
        PlatformAction.study_id == study.id, PlatformAction.state == "planned"
    ).order_by(col(PlatformAction.id))).all()
    for action in planned:
        worker_ext = _worker_ext(session, action)
        action.state, action.sent_at = "sending", utcnow()
        session.add(action)
        session.commit()  # before the call: a crash from here on is seen by reconcile()
        _crash_hook("after_sending")
        try:
            action.response = _send(platform, study, action, worker_ext)
            action.state = "done"
        except PlatformError as exc:
            action.state, action.response = "failed", {"error": str(exc)}
        _crash_hook("after_call")
        session.add(action)
        session.commit()
        counts[action.state] += 1
    return counts


def _crash_hook(point: str) -> None:
    if os.environ.get(CRASH_ENV) == point:
        os._exit(9)
