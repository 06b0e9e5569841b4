"""Amazon Mechanical Turk through boto3: the sandbox endpoint unless production is asked for.

Credentials come from boto3's usual chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a
profile); nothing is stored. One of our platform studies is one HIT.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from vsr_core.models import CrowdPlatform
from webapp.platforms.base import PlatformError, Record, RemoteSubmission

SANDBOX = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
DEFAULT_LIFETIME_SECONDS = 3 * 86400
FAILED_SCORE = 0  # the value of the "failed the qualification check" qualification
PRODUCTION = "https://mturk-requester.us-east-1.amazonaws.com"
_XMLNS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/"
    "2006-07-14/ExternalQuestion.xsd"
)


def external_question(url: str, frame_height: int = 0) -> str:
    """The ExternalQuestion XML that shows our site in the worker's frame."""
    return (
        f'<ExternalQuestion xmlns="{_XMLNS}"><ExternalURL>{escape(url)}</ExternalURL>'
        f"<FrameHeight>{frame_height}</FrameHeight></ExternalQuestion>"
    )


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """JSON-safe copy for the call log (boto3 answers hold datetimes)."""
    return dict(json.loads(json.dumps(data, default=str)))


class MTurkPlatform:
    name = CrowdPlatform.mturk.value
    # A HIT's lifetime unless its settings say otherwise; a resumed HIT lives this long again.
    resume_seconds = DEFAULT_LIFETIME_SECONDS

    def __init__(
        self,
        production: bool = False,
        client: Any | None = None,
        log: Callable[..., None] | None = None,
    ) -> None:
        self.client = client or boto3.client(
            "mturk", region_name="us-east-1", endpoint_url=PRODUCTION if production else SANDBOX
        )
        self.log = log or (lambda *_: None)

    def _call(self, op: str, **params: Any) -> dict[str, Any]:
        """One operation; the parameters and answer go to the call log (credentials never
        pass through here: botocore signs the request)."""
        try:
            answer = dict(getattr(self.client, op)(**params))
        except ClientError as exc:
            err = exc.response.get("Error", {})
            message = " ".join(str(err.get("Message", "")).split())
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            self.log(op, op, _plain(params), status, {"Error": err}, str(err.get("Code", "?")))
            raise PlatformError(
                f"MTurk {op}: {err.get('Code', '?')} {message}",
                maybe_sent=isinstance(status, int) and status >= 500,
            ) from None
        except BotoCoreError as exc:  # a timeout or a connection lost: outcome unknown
            self.log(op, op, _plain(params), None, None, type(exc).__name__)
            raise PlatformError(
                f"MTurk {op}: {' '.join(str(exc).split())}", maybe_sent=True
            ) from None
        self.log(op, op, _plain(params), 200, _plain(answer), "")
        return answer

    def create_draft(self, settings: dict[str, Any], marker: str) -> str:
        """MTurk has no drafts: creating the HIT publishes it (see docs/platforms.md). The
        marker is the UniqueRequestToken (MTurk creates at most one HIT per token) and the
        RequesterAnnotation (find_draft finds the HIT by it after a lost answer)."""
        hit = self._call(
            "create_hit",
            Title=settings["title"],
            Description=settings.get("description", settings["title"]),
            Keywords=settings.get("keywords", "images, captions"),
            Reward=f"{settings['reward_cents'] / 100:.2f}",
            MaxAssignments=int(settings.get("assignments", 1)),
            LifetimeInSeconds=int(settings.get("lifetime_seconds", DEFAULT_LIFETIME_SECONDS)),
            AssignmentDurationInSeconds=int(settings.get("duration_seconds", 3600)),
            AutoApprovalDelayInSeconds=int(settings.get("auto_approve_seconds", 7 * 86400)),
            Question=external_question(settings["url"]),
            QualificationRequirements=settings.get("qualifications", []),
            UniqueRequestToken=marker[:64],
            RequesterAnnotation=marker[:255],
        )
        return str(hit["HIT"]["HITId"])

    def find_draft(self, marker: str) -> str | None:
        """ListHITs (all pages): the HIT whose RequesterAnnotation is the marker."""
        token: str | None = None
        while True:
            params: dict[str, Any] = {"MaxResults": 100}
            if token:
                params["NextToken"] = token
            page = self._call("list_hits", **params)
            for hit in page.get("HITs", []):
                if hit.get("RequesterAnnotation") == marker[:255]:
                    return str(hit["HITId"])
            token = page.get("NextToken")
            if not token or not page.get("HITs"):
                return None

    def publish(self, external_id: str) -> None:
        return None  # the HIT is live from creation

    def pause(self, external_id: str) -> None:
        # Expire the HIT now: no new workers can accept it; accepted ones can still submit.
        self._call("update_expiration_for_hit", HITId=external_id, ExpireAt=0)

    def resume(self, external_id: str) -> None:
        # An expired HIT takes new workers again once its expiry is in the future.
        self._call(
            "update_expiration_for_hit",
            HITId=external_id,
            ExpireAt=datetime.now(UTC) + timedelta(seconds=self.resume_seconds),
        )

    def sync_submissions(self, external_id: str) -> list[RemoteSubmission]:
        out: list[RemoteSubmission] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {"HITId": external_id, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            page = self._call("list_assignments_for_hit", **params)
            out += [
                RemoteSubmission(a["AssignmentId"], a["WorkerId"], a["AssignmentStatus"])
                for a in page.get("Assignments", [])
            ]
            token = page.get("NextToken")
            if not token or not page.get("Assignments"):
                return out

    def submission_status(self, submission_id: str) -> str:
        got = self._call("get_assignment", AssignmentId=submission_id)
        return str(got["Assignment"]["AssignmentStatus"])

    def approve(self, submission_id: str, key: str) -> dict[str, Any]:
        return self._call("approve_assignment", AssignmentId=submission_id)

    def reject(self, submission_id: str, reason: str, key: str) -> dict[str, Any]:
        return self._call(
            "reject_assignment", AssignmentId=submission_id, RequesterFeedback=reason[:1024]
        )

    def request_return(self, submission_id: str, reason: str, key: str) -> dict[str, Any]:
        raise PlatformError("MTurk has no return request: reject with a reason instead")

    def bonus(
        self,
        study_external_id: str,
        submission_id: str,
        worker_external_id: str,
        cents: int,
        reason: str,
        key: str,
        record: Record | None = None,
    ) -> dict[str, Any]:
        # UniqueRequestToken = our idempotency key: MTurk refuses a second bonus with it
        # (for 24 hours; after that reconcile asks ListBonusPayments first).
        return self._call(
            "send_bonus",
            WorkerId=worker_external_id,
            BonusAmount=f"{cents / 100:.2f}",
            AssignmentId=submission_id,
            Reason=reason[:1024],
            UniqueRequestToken=key[:64],
        )

    def mark_failed(self, qualification_type_id: str, worker_external_id: str) -> None:
        """Give the worker the study's "failed the check" qualification (value 0): the HIT
        requires that it does not exist, so MTurk no longer offers them the HIT."""
        self._call(
            "associate_qualification_with_worker",
            QualificationTypeId=qualification_type_id,
            WorkerId=worker_external_id,
            IntegerValue=FAILED_SCORE,
            SendNotification=False,
        )

    def bonus_paid(self, submission_id: str, worker_external_id: str, cents: int) -> bool | None:
        """ListBonusPayments for the assignment (all pages): is there this worker's bonus of
        this amount? One bonus per assignment is ever planned (the idempotency key)."""
        amount, token = f"{cents / 100:.2f}", None
        while True:
            params: dict[str, Any] = {"AssignmentId": submission_id, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            page = self._call("list_bonus_payments", **params)
            paid = page.get("BonusPayments", [])
            if any(
                p.get("WorkerId") == worker_external_id
                and f"{float(p.get('BonusAmount', 0)):.2f}" == amount
                for p in paid
            ):
                return True
            token = page.get("NextToken")
            if not token or not paid:
                return False

    def bonuses_listed(self, study_external_id: str) -> dict[str, int] | None:
        """ListBonusPayments for the HIT (all pages), in cents per assignment."""
        out: dict[str, int] = {}
        token: str | None = None
        while True:
            params: dict[str, Any] = {"HITId": study_external_id, "MaxResults": 100}
            if token:
                params["NextToken"] = token
            page = self._call("list_bonus_payments", **params)
            paid = page.get("BonusPayments", [])
            for p in paid:
                cents = round(float(p.get("BonusAmount", 0)) * 100)
                out[p["AssignmentId"]] = out.get(p["AssignmentId"], 0) + cents
            token = page.get("NextToken")
            if not token or not paid:
                return out
