"""Sync, plan and apply: what to approve, reject and pay, sent exactly once.

plan() only writes PlatformAction rows ('planned', deterministic idempotency keys, so planning
twice adds nothing); apply() claims each row with a conditional update (planned -> sending,
committed BEFORE the call, so two applies at once never both send it) and writes
'done'/'failed' after. A crash leaves at most one row in 'sending', which reconcile() settles
once it is older than any live call could be, by asking the platform (approve/reject) or
re-sending with the same idempotency token (MTurk bonus). A Prolific bonus left 'sending' is
never re-sent: it is marked failed for a person to check, because Prolific's bonus API has no
idempotency key.

No transaction is ever open while a platform answers: on SQLite every transaction takes the
write lock (BEGIN IMMEDIATE, vsr_core.db), so one held across an HTTP call would stall every
other writer, workers' pages included.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from vsr_core.agreement import DEFAULT_THRESHOLD, Threshold
from vsr_core.kept import kept_counts
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
# A 'sending' row younger than this may still be in flight in another apply; older ones are
# a crash's leftovers. Longer than the slowest call with all its retries (4 x 10 s timeouts,
# up to 3 x 60 s Retry-After).
STALE_AFTER = timedelta(minutes=15)
CRASH_ENV = "VSR_PLATFORM_CRASH"  # tests only: os._exit at 'after_sending' or 'after_call'


@dataclass(frozen=True)
class Rules:
    min_gold_accuracy: float = 0.7
    min_gold_answers: int = 5
    min_items: int = 1
    bonus_cents_per_kept: int = 0
    reject_flagged: bool = True
    keep_threshold: float = float(DEFAULT_THRESHOLD)  # the study's keep rule


class CallLog:
    """Collects every request and answer from a client (its ``log`` callback); ``save`` writes
    them as PlatformCall rows. Buffered because a second connection writing mid-call would wait
    on the engine's own open transaction (SQLite locks the whole file)."""

    def __init__(self, platform: str, platform_study_id: int | None = None) -> None:
        self.platform = platform
        self.platform_study_id = platform_study_id  # set after a create once the row exists
        self.rows: list[PlatformCall] = []

    def __call__(self, method: str, path: str, body: Any, status: int | None, answer: Any,
                 err: str) -> None:
        self.rows.append(PlatformCall(platform=self.platform, method=method, path=path[:500],
                                      request=body, status=status, response=_small(answer),
                                      error=err[:500]))

    def take(self) -> list[PlatformCall]:
        """The calls collected so far, each naming the platform study (known after a create
        only once the row exists), and an empty log."""
        rows, self.rows = self.rows, []
        for row in rows:
            row.platform_study_id = self.platform_study_id
        return rows

    def save(self, session: Session) -> None:
        session.add_all(self.take())
        session.commit()


def _small(answer: Any) -> Any:
    return answer if isinstance(answer, dict) and len(repr(answer)) < 20000 else {"truncated": 1}


def sync(
    session: Session, platform: Platform, study: PlatformStudy,
    strategies: Mapping[str, lease_mod.LeaseStrategy], calls: CallLog | None = None,
) -> int:
    """Store the platform's submissions; participants who are gone give their leases back
    at once. Returns how many leases were released. The platform is asked with no
    transaction open; the answer is written in one transaction."""
    study_id, external_id = study.id, study.external_id
    session.commit()
    remotes = platform.sync_submissions(external_id)
    released = 0
    for remote in remotes:
        row = session.exec(select(PlatformSubmission).where(
            PlatformSubmission.platform == platform.name,
            PlatformSubmission.external_id == remote.external_id,
        )).first() or PlatformSubmission(
            study_id=study_id or 0, platform=platform.name, external_id=remote.external_id,
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
    _save_calls(session, calls)
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


def quality(session: Session, worker_id: int,
            keep_threshold: Threshold = DEFAULT_THRESHOLD) -> dict[str, Any]:
    """Gold accuracy, speed flag, items done (votes + captions' Examples written) and the
    Examples validation has kept (settled, enough votes agree with the label): the bonus
    counts only those."""
    gold = gold_score(session, worker_id)
    votes = session.exec(select(func.count()).where(Vote.worker_id == worker_id)).one()
    written = session.exec(select(
        Example.queue_settled, Example.queue_agree, Example.queue_votes
    ).where(Example.author_id == worker_id, col(Example.is_gold).is_(False))).all()
    # The project's one "kept" rule (vsr_core.kept), over the Examples validation has settled:
    # a provisional 2-1 Example may still lose, and money is not taken back.
    kept = kept_counts(((agree, n, 1) for settled, agree, n in written if settled),
                       keep_threshold).kept
    worker = session.get(Worker, worker_id)
    return {"gold_answered": gold.answered, "gold_accuracy": gold.accuracy,
            "items": int(votes) + len(written), "written": len(written),
            "kept_captions": kept, "flagged": bool(worker and worker.flagged)}


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


def rules_for(session: Session, study: PlatformStudy) -> Rules:
    """The study's gold threshold, gold minimum and keep rule, overridden by the platform
    study's own ``settings["rules"]`` (the same for the page and the CLI)."""
    from vsr_core.study import load_study_config

    cfg = load_study_config(session, study.study_id)
    base = {"min_gold_accuracy": cfg.gold_accuracy_threshold,
            "min_gold_answers": cfg.gold_min_answers, "keep_threshold": cfg.keep_threshold}
    return Rules(**(base | study.settings.get("rules", {})))


def key(study: PlatformStudy, kind: str, submission: str) -> str:
    return f"{study.platform}-{study.id}-{kind}-{submission}"[:128]


def plan(session: Session, study: PlatformStudy, rules: Rules) -> list[PlatformAction]:
    """Write the planned actions for reviewable submissions (none twice); returns the new ones.
    Two plans at once (a double click on PostgreSQL) may both insert a key: the loser's
    transaction is rolled back and planned again, finding the winner's rows."""
    try:
        return _plan_once(session, study, rules)
    except IntegrityError:
        session.rollback()
        return _plan_once(session, study, rules)


def _plan_once(session: Session, study: PlatformStudy, rules: Rules) -> list[PlatformAction]:
    added: list[PlatformAction] = []
    subs = session.exec(select(PlatformSubmission).where(
        PlatformSubmission.study_id == study.id, col(PlatformSubmission.status).in_(REVIEWABLE)
    )).all()
    for sub in subs:
        if sub.worker_id is None:
            q: dict[str, Any] = {"gold_answered": 0, "gold_accuracy": None, "items": 0,
                                 "kept_captions": 0, "flagged": False}
        else:
            q = quality(session, sub.worker_id, rules.keep_threshold)
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


@dataclass(frozen=True)
class _Claimed:
    """What a claimed action needs for its call, read before the call so that no ORM
    attribute is loaded (and no transaction begun) while the platform answers."""

    id: int
    kind: str
    target: str
    amount_cents: int
    reason: str
    key: str
    worker_external_id: str


def _send(platform: Platform, study_external_id: str, a: _Claimed) -> dict[str, Any]:
    if a.kind == "approve":
        return platform.approve(a.target, a.key)
    if a.kind == "reject":
        return platform.reject(a.target, a.reason, a.key)
    if a.kind == "return":
        return platform.request_return(a.target, a.reason, a.key)
    return platform.bonus(study_external_id, a.target, a.worker_external_id,
                          a.amount_cents, a.reason, a.key)


def _worker_ext(session: Session, platform: str, target: str) -> str:
    sub = session.exec(select(PlatformSubmission).where(
        PlatformSubmission.platform == platform, PlatformSubmission.external_id == target,
    )).first()
    return sub.worker_external_id if sub else ""


def _set_state(session: Session, action_id: int, old: str, new: str,
               response: dict[str, Any] | None = None, sent_at: datetime | None = None,
               old_sent_at: datetime | None = None) -> bool:
    """Move one action from ``old`` to ``new`` unless someone else moved it first (a
    conditional UPDATE, the only way two appliers can agree without a lock held across a
    platform call). ``old_sent_at`` pins the exact claim a reconcile looked at."""
    values: dict[str, Any] = {"state": new}
    if response is not None:
        values["response"] = response
    if sent_at is not None:
        values["sent_at"] = sent_at
    stmt = update(PlatformAction).where(
        col(PlatformAction.id) == action_id, col(PlatformAction.state) == old)
    if old_sent_at is not None:
        stmt = stmt.where(col(PlatformAction.sent_at) == old_sent_at)
    result = session.execute(stmt.values(**values))
    return int(result.rowcount or 0) == 1  # type: ignore[attr-defined]


def _claim(session: Session, action_id: int) -> _Claimed | None:
    """Take one planned action for this process: planned -> sending, committed before the
    call. Returns None when another apply claimed it first. On SQLite the transaction is
    BEGIN IMMEDIATE (vsr_core.db), so the read and the update are one writer's step."""
    try:
        if not _set_state(session, action_id, "planned", "sending", sent_at=utcnow()):
            return None
        action = session.get(PlatformAction, action_id)
        assert action is not None and action.id is not None
        claimed = _Claimed(action.id, action.kind, action.target, action.amount_cents or 0,
                           action.reason, action.idempotency_key,
                           _worker_ext(session, action.platform, action.target))
        session.commit()
        return claimed
    finally:
        session.rollback()  # a no-op after the commit; ends the read when nothing was claimed


def reconcile(session: Session, platform: Platform, study: PlatformStudy,
              stale_after: timedelta = STALE_AFTER, calls: CallLog | None = None) -> int:
    """Settle actions a crash left in 'sending' for longer than ``stale_after`` (a younger
    one may still be in flight in another apply: touching it could send it twice); returns
    how many were settled. No transaction is open during a platform call."""
    study_id = study.id
    cutoff = utcnow() - stale_after
    stuck = [(a.id or 0, a.kind, a.target, a.sent_at) for a in session.exec(
        select(PlatformAction).where(
            PlatformAction.study_id == study_id, PlatformAction.state == "sending",
            col(PlatformAction.sent_at) <= cutoff,
        ))]
    session.commit()
    settled = 0
    for action_id, kind, target, sent_at in stuck:
        response: dict[str, Any] | None = None
        if kind in DECIDED:
            try:
                status = platform.submission_status(target)
            except PlatformError:
                continue  # ask again on the next apply
            if status in DECIDED[kind]:
                new, response = "done", {"reconciled": status}
            else:
                new = "planned"  # the call never arrived: send it again
        elif kind == "bonus" and platform.name == "mturk":
            new = "planned"  # same UniqueRequestToken: MTurk pays at most once
        else:
            new = "failed"
            response = {"reconcile": "unknown whether it was sent; check on the platform"}
        settled += _set_state(session, action_id, "sending", new, response,
                              old_sent_at=sent_at)
        _save_calls(session, calls)
        session.commit()
    return settled


def apply(session: Session, platform: Platform, study: PlatformStudy,
          stale_after: timedelta = STALE_AFTER, calls: CallLog | None = None) -> dict[str, int]:
    """Send every planned action once, even with other applies running at the same time
    (each action is claimed by a conditional update first); returns counts by final state
    of the actions this call sent.

    Ends the caller's transaction first and never holds one across a platform call, so a
    second apply (or a worker's page) is never kept waiting for an HTTP answer.
    """
    study_id, study_ext = study.id, study.external_id
    session.commit()
    reconcile(session, platform, study, stale_after, calls)
    counts = {"done": 0, "failed": 0}
    planned = list(session.exec(select(PlatformAction.id).where(
        PlatformAction.study_id == study_id, PlatformAction.state == "planned"
    ).order_by(col(PlatformAction.id))))
    session.commit()
    for action_id in planned:
        claimed = _claim(session, action_id or 0)
        if claimed is None:
            continue
        _crash_hook("after_sending")
        try:
            response, state = _send(platform, study_ext, claimed), "done"
        except PlatformError as exc:
            response, state = {"error": str(exc)}, "failed"
            if _already_done(platform, claimed):
                response, state = {"already_done": str(exc)}, "done"
        _crash_hook("after_call")
        _set_state(session, claimed.id, "sending", state, response)
        _save_calls(session, calls)
        session.commit()
        counts[state] += 1
    session.expire_all()  # the caller's objects show the new states
    return counts


def _already_done(platform: Platform, a: _Claimed) -> bool:
    """A refused bonus that the platform shows as paid was paid by an earlier, crashed apply
    (MTurk refuses a second SendBonus with the same UniqueRequestToken): it is done, not
    failed. Asked of the platform, not read from the error's wording."""
    if a.kind != "bonus":
        return False
    try:
        return platform.bonus_paid(a.target, a.worker_external_id, a.amount_cents) is True
    except PlatformError:
        return False


def _save_calls(session: Session, calls: CallLog | None) -> None:
    if calls is not None and calls.rows:
        session.add_all(calls.take())


def _crash_hook(point: str) -> None:
    if os.environ.get(CRASH_ENV) == point:
        os._exit(9)
