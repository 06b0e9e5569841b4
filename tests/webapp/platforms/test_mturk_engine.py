"""The engine on MTurk (botocore Stubber, requests checked against the service model) and a
real database. A bonus left 'sending' by a crash is settled by reading ListBonusPayments
first: paid is done with no SendBonus; not paid is sent again with the same
UniqueRequestToken. A SendBonus refused as a duplicate is done when MTurk lists it as paid,
failed otherwise; one answered 5xx stays 'sending' until the platform shows what happened."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from botocore.stub import Stubber
from sqlmodel import Session, select

from vsr_core.models import PlatformAction, PlatformStudy, PlatformSubmission
from vsr_core.types import utcnow
from webapp.platforms.engine import apply
from webapp.platforms.mturk import MTurkPlatform

SEND = {
    "WorkerId": "W1",
    "BonusAmount": "0.40",
    "AssignmentId": "A1",
    "Reason": "2 kept captions",
    "UniqueRequestToken": "mturk-1-bonus-A1",
}
LIST = {"AssignmentId": "A1", "MaxResults": 100}
PAID = [
    {
        "WorkerId": "W1",
        "BonusAmount": "0.40",
        "AssignmentId": "A1",
        "Reason": "2 kept captions",
        "GrantTime": datetime(2026, 1, 1, tzinfo=UTC),
    }
]


def _bonus(session: Session, state: str) -> PlatformStudy:
    """A bonus 'planned', or left 'sending' an hour ago by a crash."""
    study = PlatformStudy(platform="mturk", external_id="H1")
    session.add(study)
    session.commit()
    session.add(
        PlatformSubmission(
            platform_study_id=study.id or 0,
            platform="mturk",
            external_id="A1",
            worker_external_id="W1",
            status="Approved",
        )
    )
    session.add(
        PlatformAction(
            platform_study_id=study.id or 0,
            platform="mturk",
            kind="bonus",
            target="A1",
            amount_cents=40,
            reason="2 kept captions",
            idempotency_key=f"mturk-{study.id}-bonus-A1",
            state=state,
            sent_at=utcnow() - timedelta(hours=1),
        )
    )
    session.commit()
    SEND["UniqueRequestToken"] = f"mturk-{study.id}-bonus-A1"
    return study


def _listed(stub: Stubber, paid: list[dict[str, object]]) -> None:
    stub.add_response("list_bonus_payments", {"NumResults": len(paid), "BonusPayments": paid}, LIST)


def _refused(stub: Stubber, paid: list[dict[str, object]]) -> None:
    stub.add_client_error(
        "send_bonus",
        "RequestError",
        "The UniqueRequestToken has already been used (request id 12ab)",
        http_status_code=400,
        expected_params=SEND,
    )
    _listed(stub, paid)


def _state(session: Session) -> str:
    return session.exec(select(PlatformAction)).one().state


def test_crashed_bonus_listed_as_paid_is_done_without_a_send(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    p, stub = stubbed
    study = _bonus(session, "sending")
    _listed(stub, PAID)  # and no send_bonus queued: a SendBonus would fail the test
    apply(session, p, study)
    assert _state(session) == "done"


def test_crashed_bonus_not_paid_is_sent_again_with_the_same_token(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    p, stub = stubbed
    study = _bonus(session, "sending")
    _listed(stub, [])
    stub.add_response("send_bonus", {}, SEND)
    assert apply(session, p, study)["done"] == 1
    assert _state(session) == "done"


def test_refused_duplicate_bonus_that_was_paid_is_done(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    p, stub = stubbed
    study = _bonus(session, "planned")
    _refused(stub, PAID)
    assert apply(session, p, study)["done"] == 1
    action = session.exec(select(PlatformAction)).one()
    assert action.state == "done" and "already_done" in (action.response or {})


def test_refused_bonus_not_paid_stays_failed(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    p, stub = stubbed
    study = _bonus(session, "planned")
    _refused(stub, [])
    assert apply(session, p, study)["failed"] == 1
    assert _state(session) == "failed"


def test_a_5xx_bonus_waits_for_the_platform(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    """SendBonus answered 503 (maybe processed): ListBonusPayments does not show it yet, so
    it stays 'sending' (a later apply reads the list again before any new send)."""
    p, stub = stubbed
    study = _bonus(session, "planned")
    stub.add_client_error(
        "send_bonus", "ServiceFault", "try later", http_status_code=503, expected_params=SEND
    )
    _listed(stub, [])
    assert apply(session, p, study)["sending"] == 1
    assert _state(session) == "sending"


def test_an_approved_assignment_shows_approved_before_a_sync(
    session: Session, stubbed: tuple[MTurkPlatform, Stubber]
) -> None:
    p, stub = stubbed
    study = PlatformStudy(platform="mturk", external_id="H1")
    session.add(study)
    session.commit()
    session.add(
        PlatformSubmission(
            platform_study_id=study.id or 0,
            platform="mturk",
            external_id="A1",
            worker_external_id="W1",
            status="Submitted",
        )
    )
    session.add(
        PlatformAction(
            platform_study_id=study.id or 0,
            platform="mturk",
            kind="approve",
            target="A1",
            reason="",
            idempotency_key=f"mturk-{study.id}-approve-A1",
        )
    )
    session.commit()
    stub.add_response("approve_assignment", {}, {"AssignmentId": "A1"})
    assert apply(session, p, study)["done"] == 1
    assert session.exec(select(PlatformSubmission)).one().status == "Approved"
