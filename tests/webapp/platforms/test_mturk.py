"""MTurkPlatform on a real boto3 client with botocore's Stubber: every request is validated
against the MTurk service model shipped with botocore (a wrong parameter fails the test)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.stub import ANY, Stubber

from webapp.platforms.base import PlatformError
from webapp.platforms.mturk import SANDBOX, MTurkPlatform, external_question


def test_default_endpoint_is_the_sandbox() -> None:
    p = MTurkPlatform()
    assert p.client.meta.endpoint_url == SANDBOX


def test_create_hit_with_external_question(stubbed: tuple[MTurkPlatform, Stubber]) -> None:
    p, stub = stubbed
    url = "https://vsr.example/start/generate?a=1&b=2"
    stub.add_response(
        "create_hit",
        {"HIT": {"HITId": "H1"}},
        {
            "Title": "Captions",
            "Description": "Captions",
            "Keywords": ANY,
            "Reward": "1.50",
            "MaxAssignments": 3,
            "LifetimeInSeconds": ANY,
            "AssignmentDurationInSeconds": ANY,
            "AutoApprovalDelayInSeconds": ANY,
            "Question": external_question(url),
            "QualificationRequirements": [
                {
                    "QualificationTypeId": "000000000000000000L0",
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [95],
                }
            ],
            # MTurk creates at most one HIT per token; the annotation finds it after a lost answer.
            "UniqueRequestToken": "vsr-marker",
            "RequesterAnnotation": "vsr-marker",
        },
    )
    hit = p.create_draft(
        {
            "title": "Captions",
            "reward_cents": 150,
            "assignments": 3,
            "url": url,
            "qualifications": [
                {
                    "QualificationTypeId": "000000000000000000L0",
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [95],
                }
            ],
        },
        "vsr-marker",
    )
    assert hit == "H1"
    assert "&amp;b=2" in external_question(url)
    stub.add_response(
        "list_hits",
        {
            "NextToken": "t",
            "NumResults": 1,
            "HITs": [{"HITId": "H0", "RequesterAnnotation": "other"}],
        },
        {"MaxResults": 100},
    )
    stub.add_response(
        "list_hits",
        {"NumResults": 1, "HITs": [{"HITId": "H1", "RequesterAnnotation": "vsr-marker"}]},
        {"MaxResults": 100, "NextToken": "t"},
    )
    assert p.find_draft("vsr-marker") == "H1"


def test_pause_expires_and_resume_extends_the_hit(stubbed: tuple[MTurkPlatform, Stubber]) -> None:
    p, stub = stubbed

    class Later:
        """Equal to an expiry about ``resume_seconds`` from now (the Stubber compares with ==)."""

        def __eq__(self, other: object) -> bool:
            soon = datetime.now(UTC) + timedelta(seconds=p.resume_seconds)
            return isinstance(other, datetime) and abs((other - soon).total_seconds()) < 60

    stub.add_response("update_expiration_for_hit", {}, {"HITId": "H1", "ExpireAt": 0})
    p.pause("H1")
    stub.add_response("update_expiration_for_hit", {}, {"HITId": "H1", "ExpireAt": Later()})
    p.resume("H1")
    stub.assert_no_pending_responses()


def test_sync_pages_approve_reject_bonus(stubbed: tuple[MTurkPlatform, Stubber]) -> None:
    p, stub = stubbed
    stub.add_response(
        "list_assignments_for_hit",
        {
            "NextToken": "t",
            "Assignments": [
                {"AssignmentId": "A1", "WorkerId": "W1", "AssignmentStatus": "Submitted"}
            ],
        },
        {"HITId": "H1", "MaxResults": 100},
    )
    stub.add_response(
        "list_assignments_for_hit",
        {
            "Assignments": [
                {"AssignmentId": "A2", "WorkerId": "W2", "AssignmentStatus": "Submitted"}
            ]
        },
        {"HITId": "H1", "MaxResults": 100, "NextToken": "t"},
    )
    stub.add_response("approve_assignment", {}, {"AssignmentId": "A1"})
    stub.add_response(
        "reject_assignment", {}, {"AssignmentId": "A2", "RequesterFeedback": "failed gold"}
    )
    stub.add_response(
        "send_bonus",
        {},
        {
            "WorkerId": "W1",
            "BonusAmount": "0.40",
            "AssignmentId": "A1",
            "Reason": "kept captions",
            "UniqueRequestToken": "bonus-1-A1",
        },
    )
    assert [s.external_id for s in p.sync_submissions("H1")] == ["A1", "A2"]
    p.approve("A1", "k")
    p.reject("A2", "failed gold", "k")
    p.bonus("H1", "A1", "W1", 40, "kept captions", "bonus-1-A1", lambda note: None)


def test_a_5xx_may_have_been_processed(stubbed: tuple[MTurkPlatform, Stubber]) -> None:
    p, stub = stubbed
    stub.add_client_error("send_bonus", "ServiceFault", "try later", http_status_code=503)
    with pytest.raises(PlatformError) as err:
        p.bonus("H1", "A1", "W1", 40, "kept", "bonus-1-A1")
    assert err.value.maybe_sent


def test_errors_are_one_line(stubbed: tuple[MTurkPlatform, Stubber]) -> None:
    p, stub = stubbed
    stub.add_client_error(
        "send_bonus",
        "RequestError",
        "This request has already been\nprocessed",
        http_status_code=400,
    )
    with pytest.raises(PlatformError) as err:
        p.bonus("H1", "A1", "W1", 40, "kept", "bonus-1-A1")
    assert not err.value.maybe_sent
    assert str(err.value) == (
        "MTurk send_bonus: RequestError This request has already been processed"
    )
    with pytest.raises(PlatformError, match="no return request"):
        p.request_return("A1", "x", "k")
