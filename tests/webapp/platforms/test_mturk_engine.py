"""The engine on MTurk (botocore Stubber, requests checked against the service model) and a
real database: a bonus whose SendBonus is refused as a duplicate of an earlier, crashed
apply ends 'done' (MTurk lists it as paid), not 'failed'; any other refusal stays failed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from botocore.stub import Stubber
from sqlmodel import Session, select

from vsr_core.models import PlatformAction, PlatformStudy, PlatformSubmission
from vsr_core.types import utcnow
from webapp.platforms.engine import apply
from webapp.platforms.mturk import MTurkPlatform

SEND = {"WorkerId": "W1", "BonusAmount": "0.40", "AssignmentId": "A1",
        "Reason": "2 kept captions", "UniqueRequestToken": "mturk-1-bonus-A1"}


def _bonus_left_sending(session: Session) -> PlatformStudy:
    """A crash after SendBonus left the bonus 'sending' an hour ago."""
    study = PlatformStudy(platform="mturk", external_id="H1")
    session.add(study)
    session.commit()
    session.add(PlatformSubmission(study_id=study.id or 0, platform="mturk", external_id="A1",
                                   worker_external_id="W1", status="Approved"))
    session.add(PlatformAction(study_id=study.id or 0, platform="mturk", kind="bonus",
                               target="A1", amount_cents=40, reason="2 kept captions",
                               idempotency_key=f"mturk-{study.id}-bonus-A1", state="sending",
                               sent_at=utcnow() - timedelta(hours=1)))
    session.commit()
    SEND["UniqueRequestToken"] = f"mturk-{study.id}-bonus-A1"
    return study


def _refused(stub: Stubber, paid: list[dict[str, object]]) -> None:
    stub.add_client_error("send_bonus", "RequestError",
                          "The UniqueRequestToken has already been used (request id 12ab)",
                          http_status_code=400, expected_params=SEND)
    stub.add_response("list_bonus_payments", {"NumResults": len(paid), "BonusPayments": paid},
                      {"AssignmentId": "A1", "MaxResults": 100})


def test_refused_duplicate_bonus_that_was_paid_is_done(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    p, stub = stubbed
    study = _bonus_left_sending(session)
    _refused(stub, [{"WorkerId": "W1", "BonusAmount": "0.40", "AssignmentId": "A1",
                     "Reason": "2 kept captions", "GrantTime": datetime(2026, 1, 1, tzinfo=UTC)}])
    assert apply(session, p, study) == {"done": 1, "failed": 0}
    action = session.exec(select(PlatformAction)).one()
    assert action.state == "done" and "already_done" in (action.response or {})


def test_refused_bonus_not_paid_stays_failed(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    p, stub = stubbed
    study = _bonus_left_sending(session)
    _refused(stub, [])
    assert apply(session, p, study) == {"done": 0, "failed": 1}
    assert session.exec(select(PlatformAction)).one().state == "failed"
