"""The platform side of a failed qualification check, set up when the platform study is
made (docs/platforms.md, "Screen-out after a failed check"): on MTurk the HIT requires the
study's "failed" qualification not to exist (CreateHIT checked by botocore's Stubber
against the service model); a qualification id that is not MTurk's is refused."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import ANY, Stubber
from sqlmodel import Session

from vsr_core.studies.store import default_study
from webapp.platforms import drafts
from webapp.platforms.base import PlatformError
from webapp.platforms.mturk import SANDBOX, MTurkPlatform

SITE = "https://vsr.example.org"
QUAL = "3QUALFAILED0000000000000000000"


def test_the_hit_keeps_out_workers_given_the_failed_qualification(session: Session) -> None:
    study = default_study(session)
    settings = drafts.new_settings(
        session,
        study,
        "mturk",
        "generate",
        reward_cents=300,
        places=5,
        base_url=SITE,
        screenout_qualification=QUAL,
    )
    assert settings["qualification_type_id"] == QUAL
    client = boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=SANDBOX,
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    with Stubber(client) as stub:
        stub.add_response(
            "create_hit",
            {"HIT": {"HITId": "HQ1"}},
            {
                "Title": ANY,
                "Description": ANY,
                "Keywords": ANY,
                "Reward": "3.00",
                "MaxAssignments": 5,
                "LifetimeInSeconds": ANY,
                "AssignmentDurationInSeconds": ANY,
                "AutoApprovalDelayInSeconds": ANY,
                "Question": ANY,
                "QualificationRequirements": [
                    {
                        "QualificationTypeId": QUAL,
                        "Comparator": "DoesNotExist",
                        "ActionsGuarded": "DiscoverPreviewAndAccept",
                    }
                ],
                "UniqueRequestToken": ANY,
                "RequesterAnnotation": ANY,
            },
        )
        row = drafts.create(session, MTurkPlatform(client=client), study, settings)
        stub.assert_no_pending_responses()
    assert row.settings["qualification_type_id"] == QUAL


@pytest.mark.parametrize(
    "bad", ["short", "3qualfailed0000000000000000000", "3QUAL FAILED 00000000000"]
)
def test_a_qualification_id_not_mturks_is_refused(session: Session, bad: str) -> None:
    with pytest.raises(PlatformError, match="MTurk qualification type id"):
        drafts.new_settings(
            session,
            default_study(session),
            "mturk",
            "generate",
            reward_cents=300,
            places=5,
            base_url=SITE,
            screenout_qualification=bad,
        )
