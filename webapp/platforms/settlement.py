"""Which work each submission is paid for: the units (votes, written Examples) done in its
own batches, and the ledger that credits each unit to one submission only.

A submission's batches are those its own platform session opened: the batch's entry names
the session (Prolific ``SESSION_ID`` is the submission id; MTurk's ``assignmentId`` is the
assignment id), the worker is the submission's, the study is the platform study's, and the
entry's platform study (Prolific ``STUDY_ID`` / MTurk ``hitId``), when given, is this one.
Work done anywhere else, in another platform study, another study or with no session, earns
this submission nothing.

Every figure comes from four grouped statements whatever the number of submissions, so the
Platforms page and plan() cost the same for 2 submissions as for 5,000.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from vsr_core import standing
from vsr_core.agreement import DEFAULT_THRESHOLD, Threshold, keep_rule
from vsr_core.models import (
    Annotation,
    Assignment,
    Batch,
    CrowdPlatform,
    Example,
    LedgerUnitKind,
    PlatformAction,
    PlatformActionState,
    PlatformLedger,
    PlatformStudy,
    PlatformSubmission,
    Vote,
    Worker,
)

# The entry parameter that names the submission, and the one that names the platform study.
SESSION_KEY: dict[str, str] = {
    CrowdPlatform.prolific: "session_id",
    CrowdPlatform.mturk: "assignment_id",
}
STUDY_KEY: dict[str, str] = {CrowdPlatform.prolific: "study_id", CrowdPlatform.mturk: "hit_id"}


@dataclass(frozen=True)
class Unit:
    kind: LedgerUnitKind
    id: int
    batch_id: int
    kept: bool = False  # an Example validation has settled and kept
    settled: bool = True  # decided: a vote, or an Example validation has settled
    gold_correct: bool | None = None  # a vote on a gold Example: right or wrong
    credited_to: int | None = None  # the submission the ledger credits it to, if any


@dataclass
class Work:
    """One submission's work: the units in its own batches, and those the ledger already
    credits to another submission (never counted again)."""

    submission_id: int
    flagged: bool = False
    batches: list[int] = field(default_factory=list)
    target: int = 0  # items its batches asked for (their sizes)
    units: list[Unit] = field(default_factory=list)
    elsewhere: int = 0

    def count(self, kind: LedgerUnitKind, kept: bool = False) -> int:
        return sum(u.kind == kind and (u.kept or not kept) for u in self.units)

    def quality(self) -> dict[str, Any]:
        gold = [u.gold_correct for u in self.units if u.gold_correct is not None]
        votes = self.count(LedgerUnitKind.vote)
        written = self.count(LedgerUnitKind.example)
        kept = self.count(LedgerUnitKind.example, kept=True)
        return {
            "batches": len(self.batches),
            "votes": votes,
            "written": written,
            "items": votes + written,
            "target": self.target,
            "pending": sum(not u.settled for u in self.units if u.credited_to is None),
            "kept_captions": kept,
            "gold_answered": len(gold),
            "gold_accuracy": sum(gold) / len(gold) if gold else None,
            "flagged": self.flagged,
            "credited_elsewhere": self.elsewhere,
        }

    def new_units(self) -> list[Unit]:
        """Decided units not in the ledger yet (those credited to this submission already
        are; undecided ones wait for their verdict)."""
        return [u for u in self.units if u.credited_to is None and u.settled]


def _owner(
    platform: str,
    ps_external_id: str,
    entry: dict[str, Any],
    by_session: dict[str, PlatformSubmission],
    worker_id: int,
) -> int | None:
    sub = by_session.get(str(entry.get(SESSION_KEY.get(platform, ""), "")))
    named = entry.get(STUDY_KEY.get(platform, ""))
    if sub is None or sub.worker_id != worker_id or (named and named != ps_external_id):
        return None
    return sub.id


def work_by_submission(
    session: Session,
    study: PlatformStudy,
    statuses: Collection[str] | None = None,
    keep_threshold: Threshold = DEFAULT_THRESHOLD,
) -> tuple[list[PlatformSubmission], dict[int, Work]]:
    """The platform study's submissions (those in ``statuses`` when given) and, by
    submission id, the work each is paid for. Four statements, whatever the count."""
    stmt = (
        select(
            PlatformSubmission,
            standing.flagged_clause(Worker.id, study.study_id, on_worker=Worker.flagged),
        )
        .outerjoin(Worker, col(Worker.id) == col(PlatformSubmission.worker_id))
        .where(PlatformSubmission.platform_study_id == study.id)
        .order_by(col(PlatformSubmission.id))
    )
    if statuses is not None:
        stmt = stmt.where(col(PlatformSubmission.status).in_(statuses))
    rows = session.exec(stmt).all()
    subs = [s for s, _ in rows]
    work = {s.id or 0: Work(s.id or 0, bool(flagged)) for s, flagged in rows}
    by_session = {s.external_id: s for s in subs if s.worker_id is not None}
    if not by_session:
        return subs, work
    workers = select(PlatformSubmission.worker_id).where(
        PlatformSubmission.platform_study_id == study.id
    )
    batch_ids = select(Batch.id).where(
        Batch.study_id == study.study_id, col(Batch.worker_id).in_(workers)
    )
    owner: dict[int, int] = {}
    for batch_id, worker_id, entry, size in session.exec(
        select(Batch.id, Batch.worker_id, Batch.entry, Batch.size).where(
            col(Batch.id).in_(batch_ids)
        )
    ):
        sub_id = _owner(study.platform, study.external_id, dict(entry or {}), by_session, worker_id)
        if sub_id is not None and batch_id is not None and sub_id in work:
            owner[batch_id] = sub_id
            work[sub_id].batches.append(batch_id)
            work[sub_id].target += size or 0
    kept_rule = keep_rule(keep_threshold)
    for unit in _units(session, batch_ids, kept_rule):
        sub_id = owner.get(unit.batch_id)
        if sub_id is None:
            continue
        if unit.credited_to is not None and unit.credited_to != sub_id:
            work[sub_id].elsewhere += 1
        else:
            work[sub_id].units.append(unit)
    return subs, work


def _units(session: Session, batch_ids: Any, kept_rule: Any) -> Iterable[Unit]:
    ledger = PlatformLedger
    votes = session.execute(
        sa_select(
            col(Vote.id),
            col(Assignment.batch_id),
            col(Example.is_gold),
            col(Example.gold_label),
            col(Vote.value),
            col(ledger.submission_id),
        )
        .join(Assignment, col(Assignment.id) == col(Vote.assignment_id))
        .join(Example, col(Example.id) == col(Vote.example_id))
        .outerjoin(
            ledger,
            and_(col(ledger.unit_kind) == LedgerUnitKind.vote, col(ledger.unit_id) == Vote.id),
        )
        .where(col(Assignment.batch_id).in_(batch_ids))
    )
    for vote_id, batch_id, is_gold, gold_label, value, credited in votes:
        gold = value == gold_label if is_gold and gold_label is not None else None
        yield Unit(
            LedgerUnitKind.vote, vote_id or 0, batch_id, gold_correct=gold, credited_to=credited
        )
    examples = session.execute(
        sa_select(
            col(Example.id),
            col(Assignment.batch_id),
            col(Example.queue_settled),
            col(Example.queue_agree),
            col(Example.queue_votes),
            col(ledger.submission_id),
        )
        .join(Annotation, col(Annotation.id) == col(Example.annotation_id))
        .join(Assignment, col(Assignment.id) == col(Annotation.assignment_id))
        .outerjoin(
            ledger,
            and_(
                col(ledger.unit_kind) == LedgerUnitKind.example, col(ledger.unit_id) == Example.id
            ),
        )
        .where(col(Assignment.batch_id).in_(batch_ids), col(Example.is_gold).is_(False))
    )
    for example_id, batch_id, settled, agree, n, credited in examples:
        # A provisional 2-1 Example may still lose, and money is not taken back: only
        # settled ones count as kept (vsr_core.kept's rule).
        kept = bool(settled) and n > 0 and bool(kept_rule(agree, n))
        yield Unit(
            LedgerUnitKind.example,
            example_id or 0,
            batch_id,
            kept=kept,
            settled=bool(settled),
            credited_to=credited,
        )


def ledger_rows(session: Session, study: PlatformStudy) -> list[PlatformLedger]:
    return list(
        session.exec(
            select(PlatformLedger)
            .where(PlatformLedger.platform_study_id == study.id)
            .order_by(col(PlatformLedger.id))
        )
    )


# What a bonus action's state means for the money the ledger credits through it.
_MONEY_OF_STATE: dict[str | None, str] = {
    PlatformActionState.done: "paid",
    PlatformActionState.planned: "pending",
    PlatformActionState.sending: "pending",
    PlatformActionState.unknown: "unknown",
    PlatformActionState.failed: "closed",
    PlatformActionState.cancelled: "closed",
}


def paid_for(session: Session, study: PlatformStudy) -> dict[int, dict[str, Any]]:
    """Per submission id, what the ledger credits it with (votes, written, kept, cents) and
    where that money stands: ``paid`` (its bonus confirmed), ``pending`` (planned or in
    flight), ``unknown`` (a person checks), ``closed`` (never to be paid) with the reasons.
    One statement."""
    out: dict[int, dict[str, Any]] = {}
    rows = session.exec(
        select(PlatformLedger, PlatformAction.state, PlatformAction.response, PlatformAction.reason)
        .outerjoin(PlatformAction, col(PlatformAction.id) == col(PlatformLedger.bonus_action_id))
        .where(PlatformLedger.platform_study_id == study.id)
        .order_by(col(PlatformLedger.id))
    )
    for row, state, response, _ in rows:
        d = out.setdefault(
            row.submission_id,
            {
                "votes": 0,
                "written": 0,
                "kept": 0,
                "cents": 0,
                "paid": 0,
                "pending": 0,
                "unknown": 0,
                "closed": 0,
                "closed_why": set(),
            },
        )
        d["votes" if row.unit_kind == LedgerUnitKind.vote else "written"] += 1
        d["kept"] += row.kept
        d["cents"] += row.cents
        if row.cents:
            where = _MONEY_OF_STATE.get(state, "pending")
            d[where] += row.cents
            if where == "closed":
                r = dict(response or {})
                d["closed_why"].add(str(r.get("cancelled") or r.get("error") or state))
    return out


# Platform statuses under which undecided work will never be paid.
_CLOSED_STATUSES = frozenset({"RETURNED", "TIMED-OUT", "REJECTED", "Rejected"})


def money_line(paid: dict[str, Any] | None, quality: dict[str, Any], status: str) -> str:
    """One submission's money in words: paid, pending (planned, or work not decided yet),
    unknown and closed with the reasons (the page and `vsr platform plan` say the same)."""
    p = paid or {"paid": 0, "pending": 0, "unknown": 0, "closed": 0, "closed_why": set()}
    undecided = int(quality.get("pending", 0))
    parts = [f"paid {p['paid']}c", f"pending {p['pending']}c"]
    if undecided:
        closed = status in _CLOSED_STATUSES
        why = f"closed (submission {status.lower()})" if closed else "pending (not validated yet)"
        parts.append(f"{undecided} units {why}")
    if p["unknown"]:
        parts.append(f"unknown {p['unknown']}c (check on the platform)")
    if p["closed"]:
        parts.append(f"closed {p['closed']}c ({'; '.join(sorted(p['closed_why']))})")
    return ", ".join(parts)


def cancelled_actions(session: Session, study: PlatformStudy) -> list[PlatformAction]:
    """The actions cancelled at send time, with the reason in ``response['cancelled']``."""
    return list(
        session.exec(
            select(PlatformAction)
            .where(
                PlatformAction.platform_study_id == study.id,
                PlatformAction.state == PlatformActionState.cancelled,
            )
            .order_by(col(PlatformAction.id))
        )
    )
