"""`reconcile`: the ledger against what the platform reports, one line per mismatch. On the
fake Prolific (its submissions; Prolific documents no bonus listing) and on MTurk under
botocore's Stubber (ListAssignmentsForHIT and ListBonusPayments, checked against the
service model)."""

from __future__ import annotations

from datetime import UTC, datetime

from botocore.stub import Stubber
from sqlmodel import Session

from tests.support.fake_prolific import TOKEN, State
from vsr_core.models import PlatformAction, PlatformStudy, PlatformSubmission
from webapp.platforms.mturk import MTurkPlatform
from webapp.platforms.prolific import ProlificPlatform
from webapp.platforms.reconcile import reconcile


def _study(session: Session, platform: str, external_id: str) -> PlatformStudy:
    row = PlatformStudy(platform=platform, external_id=external_id, state="published")
    session.add(row)
    session.commit()
    return row


def _sub(session: Session, row: PlatformStudy, sub_id: str, status: str) -> None:
    session.add(
        PlatformSubmission(
            platform_study_id=row.id or 0,
            platform=row.platform,
            external_id=sub_id,
            worker_external_id=f"W{sub_id}",
            status=status,
        )
    )


def _action(
    session: Session, row: PlatformStudy, kind: str, target: str, state: str, cents: int = 0
) -> PlatformAction:
    action = PlatformAction(
        platform_study_id=row.id or 0,
        platform=row.platform,
        kind=kind,
        target=target,
        amount_cents=cents or None,
        idempotency_key=f"{row.id}:{kind}:{target}:{state}",
        state=state,
    )
    session.add(action)
    session.commit()
    return action


def test_prolific_mismatches_one_line_each(session: Session, fake: tuple[str, State]) -> None:
    url, state = fake
    state.studies["st1"] = {"id": "st1", "status": "ACTIVE"}
    row = _study(session, "prolific", "st1")
    # s1 agrees; s2 returned since the last sync; s3 approved by hand on Prolific; s4 never
    # synced; s5 gone from Prolific; s6's approve is done here but Prolific rejected it.
    for sub_id, here, there in (
        ("s1", "APPROVED", "APPROVED"),
        ("s2", "AWAITING REVIEW", "RETURNED"),
        ("s3", "APPROVED", "APPROVED"),
        ("s4", None, "AWAITING REVIEW"),
        ("s5", "AWAITING REVIEW", None),
        ("s6", "REJECTED", "REJECTED"),
    ):
        if here:
            _sub(session, row, sub_id, here)
        if there:
            state.add_submission("st1", sub_id, f"W{sub_id}", there)
    _action(session, row, "approve", "s1", "done")
    _action(session, row, "bonus", "s1", "done", 150)
    _action(session, row, "approve", "s6", "done")
    lost = _action(session, row, "bonus", "s6", "unknown", 40)
    session.commit()
    p = ProlificPlatform(base_url=url, token=TOKEN)
    assert reconcile(session, p, row) == [
        "s2: AWAITING REVIEW in the ledger, RETURNED on prolific",
        "s3: APPROVED on prolific, no approve done in the ledger",
        "s4: AWAITING REVIEW on prolific, not in the ledger (not synced)",
        "s5: AWAITING REVIEW in the ledger, not on prolific",
        "s6: approve done in the ledger, REJECTED on prolific",
        "s6: REJECTED on prolific, no reject done in the ledger",
        f"s6: bonus £0.40 unknown (action {lost.id}) in the ledger; prolific lists no bonuses: "
        "check it on prolific",
    ]
    assert state.count("POST", "/") == 0  # reading only


def test_prolific_agreeing_ledger_has_no_line(session: Session, fake: tuple[str, State]) -> None:
    url, state = fake
    state.studies["st1"] = {"id": "st1", "status": "ACTIVE"}
    row = _study(session, "prolific", "st1")
    _sub(session, row, "s1", "APPROVED")
    state.add_submission("st1", "s1", "Ws1", "APPROVED")
    _action(session, row, "approve", "s1", "done")
    _action(session, row, "bonus", "s1", "done", 150)
    session.commit()
    assert reconcile(session, ProlificPlatform(base_url=url, token=TOKEN), row) == []


def _assignment(aid: str, status: str) -> dict[str, object]:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return {
        "AssignmentId": aid,
        "WorkerId": f"W{aid}",
        "HITId": "HIT1",
        "AssignmentStatus": status,
        "AcceptTime": now,
        "SubmitTime": now,
    }


def _bonus(aid: str, amount: str) -> dict[str, object]:
    return {
        "WorkerId": f"W{aid}",
        "BonusAmount": amount,
        "AssignmentId": aid,
        "Reason": "kept captions",
        "GrantTime": datetime(2026, 1, 2, tzinfo=UTC),
    }


def test_mturk_bonuses_from_list_bonus_payments(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    p, stub = stubbed
    row = _study(session, "mturk", "HIT1")
    for aid in ("A1", "A2", "A3", "A4"):
        _sub(session, row, aid, "Approved")
        _action(session, row, "approve", aid, "done")
    # A1 agrees; A2 was paid twice on MTurk; A3's bonus is done here, absent on MTurk; A4's
    # answer was lost here, and MTurk shows it paid.
    _action(session, row, "bonus", "A1", "done", 50)
    _action(session, row, "bonus", "A2", "done", 25)
    _action(session, row, "bonus", "A3", "done", 30)
    lost = _action(session, row, "bonus", "A4", "sending", 60)
    session.commit()
    stub.add_response(
        "list_assignments_for_hit",
        {"Assignments": [_assignment(a, "Approved") for a in ("A1", "A2", "A3", "A4")]},
        {"HITId": "HIT1", "MaxResults": 100},
    )
    stub.add_response(
        "list_bonus_payments",
        {
            "BonusPayments": [_bonus("A1", "0.50"), _bonus("A2", "0.25")],
            "NextToken": "page2",
        },
        {"HITId": "HIT1", "MaxResults": 100},
    )
    stub.add_response(
        "list_bonus_payments",
        {"BonusPayments": [_bonus("A2", "0.25"), _bonus("A4", "0.60")]},
        {"HITId": "HIT1", "MaxResults": 100, "NextToken": "page2"},
    )
    assert reconcile(session, p, row) == [
        "A2: bonus $0.25 done in the ledger, $0.50 paid on mturk",
        "A3: bonus $0.30 done in the ledger, $0.00 paid on mturk",
        f"A4: bonus $0.00 done in the ledger; bonus $0.60 sending (action {lost.id}), "
        "$0.60 paid on mturk",
    ]
