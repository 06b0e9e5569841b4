"""Sync, plan and apply: what to approve, reject and pay, sent exactly once.

plan() judges each submission on the work in its own batches (webapp.platforms.settlement),
writes PlatformAction rows ('planned', deterministic idempotency keys, so planning twice
adds nothing) and credits every unit of work an approved submission is paid for in the
ledger (PlatformLedger, unique per unit: no unit is paid twice, across submissions and
platform studies). apply() claims each row with a conditional update (planned -> sending,
committed BEFORE the call, so two applies at once never both send it) and writes
done/failed/unknown after.

Nothing that creates or pays is ever sent twice automatically. A request whose answer was
lost (timeout, 5xx, connection dropped: ``PlatformError.maybe_sent``) stays 'sending'; a
Prolific bonus records its set-up id before the pay request, and a pay whose answer was
lost becomes 'unknown' for a person (Prolific documents that each pay request pays again,
and offers no listing of paid bonuses). reconcile() settles rows left 'sending' once they
are older than any live call by reading the platform: the submission's status
(approve/reject), ListBonusPayments (MTurk, re-sent with the same UniqueRequestToken only
when not there), or the pay marker (Prolific: no marker means pay was never sent).

No transaction is ever open while a platform answers: on SQLite every transaction takes the
write lock (BEGIN IMMEDIATE, vsr_core.db), so one held across an HTTP call would stall every
other writer, workers' pages included.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from vsr_core import audit
from vsr_core.agreement import DEFAULT_THRESHOLD
from vsr_core.audit import Actor
from vsr_core.authenticity_db import held_for_review
from vsr_core.models import (
    Assignment,
    AuditKind,
    CrowdPlatform,
    LeaseStatus,
    LedgerUnitKind,
    PlatformAction,
    PlatformActionKind,
    PlatformActionState,
    PlatformCall,
    PlatformLedger,
    PlatformStudy,
    PlatformSubmission,
    Worker,
)
from vsr_core.tables import PLATFORM_ACTION, PLATFORM_LEDGER
from vsr_core.types import utcnow
from webapp.crowd import leases as lease_mod
from webapp.platforms import settlement
from webapp.platforms.base import GONE, Platform, PlatformError
from webapp.platforms.standing import worker_standing

# Statuses that wait for our decision, and those that show a decision was already taken.
REVIEWABLE = frozenset({"AWAITING REVIEW", "Submitted"})
APPROVED = frozenset({"APPROVED", "Approved"})
DECIDED: dict[str, set[str]] = {
    PlatformActionKind.approve: {"APPROVED", "Approved"},
    PlatformActionKind.reject: {"REJECTED", "Rejected"},
}
# Each platform's own word for a submission a confirmed approve/reject has moved.
DECIDED_WORD: dict[str, dict[str, str]] = {
    CrowdPlatform.prolific: {
        PlatformActionKind.approve: "APPROVED",
        PlatformActionKind.reject: "REJECTED",
    },
    CrowdPlatform.mturk: {
        PlatformActionKind.approve: "Approved",
        PlatformActionKind.reject: "Rejected",
    },
}
# A 'sending' row younger than this may still be in flight in another apply; older ones are
# a crash's leftovers. Longer than the slowest call (10 s timeouts, a few 429 waits).
STALE_AFTER = timedelta(minutes=15)
# The least a person may ask for (`vsr platform apply --stale-minutes`): below the longest a
# live call can take, a second apply would settle a claim still in flight.
MIN_STALE = timedelta(minutes=5)
PLAN_ATTEMPTS = 3
PAY_SENT = "pay_sent"  # in a bonus action's response: the paying request was sent
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rules:
    min_gold_accuracy: float = 0.7
    min_gold_answers: int = 5
    # Items a submission must have done in its own batches; None: the batches' own targets
    # (their sizes), so "Finish now" after one item of four is not approved.
    min_items: int | None = None
    bonus_cents_per_kept: int = 0
    reject_flagged: bool = True
    bonus_cents_per_vote: int = 0
    keep_threshold: float = float(DEFAULT_THRESHOLD)  # the study's keep rule


class CallLog:
    """Collects every request and answer from a client (its ``log`` callback); ``save`` writes
    them as PlatformCall rows. Buffered because a second connection writing mid-call would wait
    on the engine's own open transaction (SQLite locks the whole file)."""

    def __init__(self, platform: str, platform_study_id: int | None = None) -> None:
        self.platform = platform
        self.platform_study_id = platform_study_id  # set after a create once the row exists
        self.rows: list[PlatformCall] = []

    def __call__(
        self, method: str, path: str, body: Any, status: int | None, answer: Any, err: str
    ) -> None:
        self.rows.append(
            PlatformCall(
                platform=self.platform,
                method=method,
                path=path[:500],
                request=body,
                status=status,
                response=_small(answer),
                error=err[:500],
            )
        )

    def name_study(self, platform_study_id: int | None) -> None:
        """The calls from now on (and those buffered) are for this platform study (None: a
        create the platform refused, whose row is gone)."""
        self.platform_study_id = platform_study_id

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
    if isinstance(answer, str) and len(answer) < 2000:
        return {"text": answer}  # Prolific answers a pay request with a sentence
    return answer if isinstance(answer, dict) and len(repr(answer)) < 20000 else {"truncated": 1}


def sync(
    session: Session,
    platform: Platform,
    study: PlatformStudy,
    strategies: Mapping[str, lease_mod.LeaseStrategy],
    calls: CallLog | None = None,
    *,
    actor: Actor | None = None,
) -> int:
    """Store the platform's submissions; participants who are gone give their leases back
    at once. Returns how many leases were released. The platform is asked with no
    transaction open; the answer is written in one transaction (with ``actor``'s audit
    record of the sync)."""
    study_id, external_id = study.id, study.external_id
    session.commit()
    remotes = platform.sync_submissions(external_id)
    released = 0
    for remote in remotes:
        row = session.exec(
            select(PlatformSubmission).where(
                PlatformSubmission.platform == platform.name,
                PlatformSubmission.external_id == remote.external_id,
            )
        ).first() or PlatformSubmission(
            platform_study_id=study_id or 0,
            platform=platform.name,
            external_id=remote.external_id,
            worker_external_id=remote.worker_external_id,
            status=remote.status,
        )
        worker = session.exec(
            select(Worker).where(
                Worker.source == platform.name, Worker.external_id == remote.worker_external_id
            )
        ).first()
        row.status, row.synced_at = remote.status, utcnow()
        row.worker_id = worker.id if worker else None
        session.add(row)
        if worker is not None and remote.status in GONE:
            released += _release_leases(session, worker, strategies)
    study.synced_at = utcnow()
    session.add(study)
    if actor is not None:
        audit.record(
            session,
            actor,
            AuditKind.platform_step,
            study_id=study.study_id,
            target=f"platform study {study_id}",
            change={"step": "sync", "submissions": len(remotes), "leases_released": released},
        )
    _save_calls(session, calls)
    session.commit()
    log.info(
        "synced %s submissions of platform study %s; %s leases released",
        len(remotes),
        study_id,
        released,
    )
    return released


def _release_leases(
    session: Session, worker: Worker, strategies: Mapping[str, lease_mod.LeaseStrategy]
) -> int:
    active = session.exec(
        select(Assignment).where(
            Assignment.worker_id == worker.id, Assignment.status == LeaseStatus.active
        )
    ).all()
    n = 0
    for lease in active:
        strategy = strategies.get(lease.kind)
        if strategy is not None:
            lease_mod.release(session, lease, strategy)
            n += 1
    return n


def _verdict(q: dict[str, Any], rules: Rules) -> str | None:
    """None when the work passes, else the reason to reject."""
    if rules.reject_flagged and q["flagged"]:
        return "answers flagged as too fast"
    acc = q["gold_accuracy"]
    if (
        q["gold_answered"] >= rules.min_gold_answers
        and acc is not None
        and acc < rules.min_gold_accuracy
    ):
        return f"gold accuracy {acc:.0%} below {rules.min_gold_accuracy:.0%}"
    need = max(1, rules.min_items if rules.min_items is not None else q["target"])
    if q["items"] < need:  # approval needs the work asked for, in this study
        return f"{q['items']} items done in this study's batches, fewer than the {need} required"
    return None


def rules_for(session: Session, study: PlatformStudy) -> Rules:
    """The study's gold threshold, gold minimum and keep rule, overridden by the platform
    study's own ``settings["rules"]`` (the same for the page and the CLI)."""
    from vsr_core.studies.settings import load_study_config

    cfg = load_study_config(session, study.study_id)
    base = {
        "min_gold_accuracy": cfg.gold_accuracy_threshold,
        "min_gold_answers": cfg.gold_min_answers,
        "keep_threshold": cfg.keep_threshold,
    }
    return Rules(**(base | study.settings.get("rules", {})))


def key(study: PlatformStudy, kind: str, submission: str) -> str:
    return f"{study.platform}-{study.id}-{kind}-{submission}"[:128]


def plan(
    session: Session, study: PlatformStudy, rules: Rules, *, actor: Actor | None = None
) -> list[PlatformAction]:
    """Write the planned actions for reviewable submissions (none twice) and credit the work
    each approved one is paid for in the ledger; returns the new actions.

    Two plans at once (a double click, or plans of two platform studies on PostgreSQL) may
    both insert an action key or a ledger unit: the database refuses the second, the loser's
    transaction is rolled back and planned again, finding the winner's rows."""
    for attempt in range(PLAN_ATTEMPTS):
        try:
            added = _plan_once(session, study, rules, actor)
            log.info("planned %s new actions for platform study %s", len(added), study.id)
            return added
        except IntegrityError:
            session.rollback()
            if attempt == PLAN_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _plan_once(
    session: Session, study: PlatformStudy, rules: Rules, actor: Actor | None
) -> list[PlatformAction]:
    """One plan in one transaction and a fixed number of statements: the work in four
    grouped reads, the new actions and ledger rows each in one multi-row INSERT."""
    subs, work = settlement.work_by_submission(
        session, study, REVIEWABLE | APPROVED, rules.keep_threshold
    )
    have = set(
        session.exec(
            select(PlatformAction.idempotency_key).where(
                PlatformAction.platform_study_id == study.id
            )
        )
    )
    # A worker flagged by the authenticity evidence is held for a person's review: no
    # approve, reject or bonus is planned for their work until someone decides.
    held = held_for_review(session, study.study_id, {s.worker_id for s in subs if s.worker_id})
    standing = _standings(session, study, subs)
    added: list[PlatformAction] = []
    # (submission id, unit, its cents, the key of the bonus action that pays it)
    credit: list[tuple[int, settlement.Unit, int, str | None]] = []
    qualities: list[dict[str, Any]] = []
    for sub in subs:
        if sub.worker_id in held:
            continue
        w = work[sub.id or 0]
        q = w.quality()
        approved = sub.status in APPROVED
        if approved and standing.get(sub.id or 0):
            continue  # no new money for a worker who may not be paid; their work stays open
        reason = None if approved else _verdict(q, rules)
        # Only decided units are credited: an Example validation has not settled yet stays
        # pending and is credited (and paid, if kept) by a later plan.
        units = [] if reason else w.new_units()
        cents = [_unit_cents(u, rules) for u in units]
        wanted: list[tuple[PlatformActionKind, int | None, str]] = (
            []
            if approved
            else [(PlatformActionKind.reject, None, reason)]
            if reason
            else [(PlatformActionKind.approve, None, "")]
        )
        if sum(cents):
            wanted.append((PlatformActionKind.bonus, sum(cents), _bonus_reason(units, rules)))
        bonus_key: str | None = None
        for kind, amount, why in wanted:
            k = key(study, kind, sub.external_id)
            if kind == PlatformActionKind.bonus:
                k = _next_key(k, have)  # each settlement's kept work gets its own bonus
            if k in have:
                continue
            added.append(
                PlatformAction(
                    platform_study_id=study.id or 0,
                    platform=study.platform,
                    kind=kind,
                    target=sub.external_id,
                    amount_cents=amount,
                    reason=why or "",
                    idempotency_key=k,
                )
            )
            bonus_key = k if kind == PlatformActionKind.bonus else bonus_key
        credit += [
            (sub.id or 0, u, c, bonus_key if c else None) for u, c in zip(units, cents, strict=True)
        ]
        qualities.append({"id": sub.id, "quality": {**q, "bonus_cents": sum(cents)}})
    if qualities:
        session.execute(update(PlatformSubmission), qualities)
    if added:
        # Core's executemany on the table: one statement (the ORM's bulk path sends a row
        # at a time here, split by the NULL amounts and JSON columns).
        session.connection().execute(
            insert(PLATFORM_ACTION), [a.model_dump(exclude={"id"}) for a in added]
        )
    if credit:
        keys = {k for *_, k in credit if k}
        ids = (
            dict(
                session.exec(
                    select(PlatformAction.idempotency_key, PlatformAction.id).where(
                        col(PlatformAction.idempotency_key).in_(keys)
                    )
                ).all()
            )
            if keys
            else {}
        )
        # The unique (unit_kind, unit_id) key: a unit another submission or a concurrent
        # plan already holds makes this INSERT fail, and plan() starts again.
        session.connection().execute(
            insert(PLATFORM_LEDGER),
            [
                PlatformLedger(
                    unit_kind=u.kind,
                    unit_id=u.id,
                    platform_study_id=study.id or 0,
                    submission_id=sub_id,
                    batch_id=u.batch_id,
                    kept=u.kept,
                    cents=c,
                    bonus_action_id=ids.get(k) if k else None,
                ).model_dump(exclude={"id"})
                for sub_id, u, c, k in credit
            ],
        )
    if actor is not None:
        audit.record(
            session,
            actor,
            AuditKind.platform_plan,
            study_id=study.study_id,
            target=f"platform study {study.id}",
            change={
                "new_actions": dict(Counter(str(a.kind) for a in added)),
                "bonus_cents": sum(a.amount_cents or 0 for a in added),
                "rules": dict(study.settings.get("rules", {})),
            },
        )
    session.commit()
    return added


def _next_key(base: str, have: set[str]) -> str:
    """The first of ``base``, ``base-2``, ``base-3``... not used yet (ids stay under 128)."""
    k, n = base, 1
    while k in have:
        n += 1
        k = f"{base[:120]}-{n}"
    return k


def _standings(
    session: Session, study: PlatformStudy, subs: list[PlatformSubmission]
) -> dict[int, str | None]:
    """Per approved submission, why its worker may not be paid (None: may be). The workers
    are read in one statement first, so each standing is read from the session."""
    ids = {s.worker_id for s in subs if s.status in APPROVED and s.worker_id is not None}
    if ids:
        session.exec(select(Worker).where(col(Worker.id).in_(ids))).all()
    return {
        s.id or 0: worker_standing(session, study.study_id, s.worker_id)
        for s in subs
        if s.status in APPROVED
    }


def _unit_cents(unit: settlement.Unit, rules: Rules) -> int:
    if unit.kind == LedgerUnitKind.example:
        return rules.bonus_cents_per_kept if unit.kept else 0
    return rules.bonus_cents_per_vote


def _bonus_reason(units: list[settlement.Unit], rules: Rules) -> str:
    kept = sum(u.kind == LedgerUnitKind.example and u.kept for u in units)
    votes = sum(u.kind == LedgerUnitKind.vote for u in units) if rules.bonus_cents_per_vote else 0
    parts = [f"{kept} kept captions"] if kept and rules.bonus_cents_per_kept else []
    parts += [f"{votes} votes"] if votes else []
    return ", ".join(parts)


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
    sent_at: datetime  # this claim's mark: every later state change is pinned to it


class ClaimLost(Exception):
    """Another apply (a reconcile of a claim it took for a crash's) owns the action now:
    this one must not send its paying request."""


# What a claimed action's facts say at send time: send it, wait (a bonus whose approve is
# not confirmed yet), or cancel it with a reason.
_WAIT = "wait"


def _send(
    session: Session,
    platform: Platform,
    study_external_id: str,
    a: _Claimed,
    pinned: dict[int, datetime],
) -> dict[str, Any]:
    if a.kind == PlatformActionKind.approve:
        return platform.approve(a.target, a.key)
    if a.kind == PlatformActionKind.reject:
        return platform.reject(a.target, a.reason, a.key)
    if a.kind == PlatformActionKind.return_:
        return platform.request_return(a.target, a.reason, a.key)

    def record(note: dict[str, Any]) -> None:
        """Write-ahead: what the pay request is about to do, committed before it is sent,
        and only while this apply still owns the claim (compare-and-set on the claim's
        mark). The mark moves on, so a reconcile that read the row before this write can no
        longer re-plan it."""
        moved = utcnow()
        owned = _set_state(
            session,
            a.id,
            PlatformActionState.sending,
            PlatformActionState.sending,
            {**note, PAY_SENT: True},
            sent_at=moved,
            old_sent_at=a.sent_at,
        )
        session.commit()
        if not owned:
            raise ClaimLost(f"bonus {a.target}: claimed by another apply before its pay")
        pinned[a.id] = moved

    return platform.bonus(
        study_external_id, a.target, a.worker_external_id, a.amount_cents, a.reason, a.key, record
    )


def _worker_ext(session: Session, platform: str, target: str) -> str:
    sub = session.exec(
        select(PlatformSubmission).where(
            PlatformSubmission.platform == platform,
            PlatformSubmission.external_id == target,
        )
    ).first()
    return sub.worker_external_id if sub else ""


def _set_state(
    session: Session,
    action_id: int,
    old: PlatformActionState,
    new: PlatformActionState,
    response: dict[str, Any] | None = None,
    sent_at: datetime | None = None,
    old_sent_at: datetime | None = None,
) -> bool:
    """Move one action from ``old`` to ``new`` unless someone else moved it first (a
    conditional UPDATE, the only way two appliers can agree without a lock held across a
    platform call). ``old_sent_at`` pins the exact claim a reconcile looked at."""
    values: dict[str, Any] = {"state": new}
    if response is not None:
        values["response"] = response
    if sent_at is not None:
        values["sent_at"] = sent_at
    stmt = update(PlatformAction).where(
        col(PlatformAction.id) == action_id, col(PlatformAction.state) == old
    )
    if old_sent_at is not None:
        stmt = stmt.where(col(PlatformAction.sent_at) == old_sent_at)
    result = session.execute(stmt.values(**values))
    return int(result.rowcount or 0) == 1  # type: ignore[attr-defined]


def _claim(session: Session, action_id: int) -> _Claimed | None:
    """Take one planned action for this process: planned -> sending, committed before the
    call (the write-ahead record of the intent). Returns None when another apply claimed it
    first, or when the facts read in the same transaction forbid sending it now: the
    submission's last synced status and the worker's standing (then it is cancelled with
    the reason), or, for a bonus, an approve not confirmed yet (then it stays planned). On
    SQLite the transaction is BEGIN IMMEDIATE (vsr_core.db), so the reads and the update
    are one writer's step; on PostgreSQL the update locks the row first."""
    try:
        mark = utcnow()
        if not _set_state(
            session,
            action_id,
            PlatformActionState.planned,
            PlatformActionState.sending,
            {},
            sent_at=mark,
        ):
            return None
        action = session.get(PlatformAction, action_id)
        assert action is not None and action.id is not None
        session.refresh(action)
        sub = _submission(session, action.platform, action.target)
        verdict = _send_time_check(session, action, sub)
        if verdict == _WAIT:
            return None  # the rollback below puts it back to planned, untouched
        if verdict is not None:
            _set_state(
                session,
                action.id,
                PlatformActionState.sending,
                PlatformActionState.cancelled,
                {"cancelled": verdict},
                old_sent_at=mark,
            )
            session.commit()
            log.info("%s %s cancelled: %s", action.kind, action.target, verdict)
            return None
        claimed = _Claimed(
            action.id,
            action.kind,
            action.target,
            action.amount_cents or 0,
            action.reason,
            action.idempotency_key,
            sub.worker_external_id if sub else "",
            mark,
        )
        session.commit()
        return claimed
    finally:
        session.rollback()  # a no-op after the commit; ends the read when nothing was claimed


def _submission(session: Session, platform: str, target: str) -> PlatformSubmission | None:
    return session.exec(
        select(PlatformSubmission).where(
            PlatformSubmission.platform == platform,
            PlatformSubmission.external_id == target,
        )
    ).first()


def _send_time_check(
    session: Session, action: PlatformAction, sub: PlatformSubmission | None
) -> str | None:
    """The facts at the moment of sending: None to send, ``_WAIT`` to leave it planned, or
    the reason it is cancelled. Money (approve, bonus) never goes to a submission the
    platform reports returned, timed out or rejected, nor to a worker who may not be paid;
    a bonus goes only after its submission's approve is confirmed."""
    if action.kind == PlatformActionKind.return_:
        return None
    status = sub.status if sub is not None else ""
    if status in GONE and not (
        action.kind == PlatformActionKind.reject and status in DECIDED[PlatformActionKind.reject]
    ):
        return f"submission {status.lower()} on the platform"
    if action.kind == PlatformActionKind.reject:
        return None
    study = session.get(PlatformStudy, action.platform_study_id)
    standing = worker_standing(
        session, study.study_id if study else 0, sub.worker_id if sub is not None else None
    )
    if standing is not None:
        return standing
    if action.kind != PlatformActionKind.bonus:
        return None
    if status in DECIDED[PlatformActionKind.approve]:
        return None
    approve = session.exec(
        select(PlatformAction.state).where(
            PlatformAction.platform_study_id == action.platform_study_id,
            PlatformAction.kind == PlatformActionKind.approve,
            PlatformAction.target == action.target,
        )
    ).first()
    if approve == PlatformActionState.done:
        return None
    if approve in (PlatformActionState.planned, PlatformActionState.sending):
        return _WAIT
    return f"its approve is {approve or 'not planned'}; a bonus needs a confirmed approve"


def _settle_lost(
    platform: Platform,
    kind: str,
    target: str,
    worker_ext: str,
    cents: int,
    response: dict[str, Any],
    stale: bool,
) -> tuple[PlatformActionState, dict[str, Any]] | None:
    """What a 'sending' action whose answer never came is, read from the platform; None to
    leave it 'sending' (ask again later). ``stale``: older than any live call, so a request
    that has not shown by now never arrived and may be sent again (approve/reject: the
    platform refuses a second transition anyway; MTurk bonus: same UniqueRequestToken)."""
    try:
        if kind in DECIDED:
            status = platform.submission_status(target)
            if status in DECIDED[kind]:
                return PlatformActionState.done, {"reconciled": status}
            return (PlatformActionState.planned, {"reconciled": status}) if stale else None
        if kind == PlatformActionKind.bonus and platform.name == CrowdPlatform.mturk:
            if platform.bonus_paid(target, worker_ext, cents):
                return PlatformActionState.done, {"reconciled": "ListBonusPayments shows it paid"}
            return (PlatformActionState.planned, {"reconciled": "not paid"}) if stale else None
    except PlatformError:
        return None  # ask again on the next apply
    if kind == PlatformActionKind.bonus:
        if response.get(PAY_SENT):
            return PlatformActionState.unknown, {
                **response,
                "unknown": "the pay request was sent and its answer lost; it is "
                "never re-sent (each pay request pays again): check the bonus on Prolific",
            }
        # The pay request was never sent (its marker is written before it): an unpaid
        # set-up, if any, pays nothing, so the bonus may be planned again.
        return (
            (PlatformActionState.planned, {**response, "reconciled": "pay never sent"})
            if stale
            else None
        )
    return (PlatformActionState.unknown, {"unknown": "check on the platform"}) if stale else None


def reconcile(
    session: Session,
    platform: Platform,
    study: PlatformStudy,
    stale_after: timedelta = STALE_AFTER,
    calls: CallLog | None = None,
) -> int:
    """Settle actions left in 'sending' for longer than ``stale_after`` (a younger one may
    still be in flight in another apply: touching it could send it twice) by reading the
    platform's state; returns how many were settled. No transaction is open during a call."""
    study_id = study.id
    cutoff = utcnow() - stale_after
    stuck = [
        (a.id or 0, a.kind, a.target, a.amount_cents or 0, dict(a.response or {}), a.sent_at)
        for a in session.exec(
            select(PlatformAction).where(
                PlatformAction.platform_study_id == study_id,
                PlatformAction.state == PlatformActionState.sending,
                col(PlatformAction.sent_at) <= cutoff,
            )
        )
    ]
    workers = {t: _worker_ext(session, study.platform, t) for _, _, t, _, _, _ in stuck}
    session.commit()
    settled = 0
    for action_id, kind, target, cents, response, sent_at in stuck:
        outcome = _settle_lost(platform, kind, target, workers[target], cents, response, True)
        if outcome is not None and _set_state(
            session,
            action_id,
            PlatformActionState.sending,
            outcome[0],
            outcome[1],
            old_sent_at=sent_at,
        ):
            settled += 1
            if outcome[0] == PlatformActionState.done:
                _record_decision(session, platform.name, kind, target)
        _save_calls(session, calls)
        session.commit()
    if settled:
        log.info("reconciled %s actions of platform study %s", settled, study_id)
    return settled


def apply(
    session: Session,
    platform: Platform,
    study: PlatformStudy,
    stale_after: timedelta = STALE_AFTER,
    calls: CallLog | None = None,
    *,
    actor: Actor | None = None,
) -> dict[str, int]:
    """Send every planned action once, even with other applies running at the same time
    (each action is claimed by a conditional update first); returns counts by final state
    of the actions this call sent ('sending': the answer was lost, settled later).

    Ends the caller's transaction first and never holds one across a platform call, so a
    second apply (or a worker's page) is never kept waiting for an HTTP answer.

    With ``actor``, the apply is recorded in the audit trail as it starts, and each action
    sent with its outcome, in the transaction that stores that outcome.
    """
    study_id, study_ext = study.id, study.external_id
    site_study_id = study.study_id
    if actor is not None:
        audit.record(
            session,
            actor,
            AuditKind.platform_apply,
            study_id=site_study_id,
            target=f"platform study {study_id}",
            change={"platform": platform.name, "external_id": study_ext},
        )
    session.commit()
    reconcile(session, platform, study, stale_after, calls)
    counts: dict[str, int] = dict.fromkeys(
        (
            PlatformActionState.done,
            PlatformActionState.failed,
            PlatformActionState.unknown,
            PlatformActionState.sending,
        ),
        0,
    )
    planned = list(
        session.exec(
            select(PlatformAction.id)
            .where(
                PlatformAction.platform_study_id == study_id,
                PlatformAction.state == PlatformActionState.planned,
            )
            .order_by(col(PlatformAction.id))
        )
    )
    session.commit()
    for action_id in planned:
        claimed = _claim(session, action_id or 0)
        if claimed is None:
            continue
        pinned = {claimed.id: claimed.sent_at}
        outcome = _outcome(session, platform, study_ext, claimed, pinned)
        if outcome is None:
            continue  # another apply owns it now: it records the outcome
        state, response = outcome
        if state != PlatformActionState.sending:
            if (
                _set_state(
                    session,
                    claimed.id,
                    PlatformActionState.sending,
                    state,
                    response,
                    old_sent_at=pinned[claimed.id],
                )
                and state == PlatformActionState.done
            ):
                _record_decision(session, platform.name, claimed.kind, claimed.target)
        else:
            _set_state(
                session,
                claimed.id,
                PlatformActionState.sending,
                state,
                {**_response_of(session, claimed.id), **response},
                old_sent_at=pinned[claimed.id],
            )
        if actor is not None:
            audit.record(
                session,
                actor,
                AuditKind.platform_action,
                study_id=site_study_id,
                target=f"{claimed.kind} {claimed.target}",
                change={
                    "platform_study": study_id,
                    "action": str(claimed.kind),
                    "submission": claimed.target,
                    "amount_cents": claimed.amount_cents,
                    "state": str(state),
                },
            )
        _save_calls(session, calls)
        session.commit()
        log.info("%s %s of platform study %s: %s", claimed.kind, claimed.target, study_id, state)
        counts[state] += 1
    session.expire_all()  # the caller's objects show the new states
    return counts


def _record_decision(session: Session, platform: str, kind: str, target: str) -> None:
    """The status a confirmed approve/reject gave the submission, stored at once so that the
    page does not show it awaiting review until the next sync. Only a still-reviewable
    status is replaced: a newer status read by a sync is kept."""
    word = DECIDED_WORD.get(platform, {}).get(kind)
    if word is None:
        return
    session.execute(
        update(PlatformSubmission)
        .where(
            col(PlatformSubmission.platform) == platform,
            col(PlatformSubmission.external_id) == target,
            col(PlatformSubmission.status).in_(REVIEWABLE),
        )
        .values(status=word)
    )


def _response_of(session: Session, action_id: int) -> dict[str, Any]:
    action = session.get(PlatformAction, action_id)
    return dict(action.response or {}) if action is not None else {}


def _outcome(
    session: Session,
    platform: Platform,
    study_ext: str,
    a: _Claimed,
    pinned: dict[int, datetime],
) -> tuple[PlatformActionState, dict[str, Any]] | None:
    """Send one claimed action; its new state and what to record (None: the claim was
    lost to another apply before anything that pays was sent)."""
    try:
        return PlatformActionState.done, _send(session, platform, study_ext, a, pinned)
    except ClaimLost as exc:
        log.warning("%s", exc)
        return None
    except PlatformError as exc:
        if not exc.maybe_sent:
            if _already_done(platform, a):
                return PlatformActionState.done, {"already_done": str(exc)}
            return PlatformActionState.failed, {**_response_of(session, a.id), "error": str(exc)}
        lost = {"lost": str(exc)}
        settled = _settle_lost(
            platform,
            a.kind,
            a.target,
            a.worker_external_id,
            a.amount_cents,
            _response_of(session, a.id),
            False,
        )
        return settled if settled is not None else (PlatformActionState.sending, lost)


def _already_done(platform: Platform, a: _Claimed) -> bool:
    """A refused bonus that the platform shows as paid was paid by an earlier, crashed apply
    (MTurk refuses a second SendBonus with the same UniqueRequestToken): it is done, not
    failed. Asked of the platform, not read from the error's wording."""
    if a.kind != PlatformActionKind.bonus:
        return False
    try:
        return platform.bonus_paid(a.target, a.worker_external_id, a.amount_cents) is True
    except PlatformError:
        return False


def _save_calls(session: Session, calls: CallLog | None) -> None:
    if calls is not None and calls.rows:
        session.add_all(calls.take())
