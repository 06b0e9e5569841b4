"""Prolific through its public REST API (https://docs.prolific.com, API v1).

The token comes from PROLIFIC_API_TOKEN (vsr_core.settings.PlatformCredentials) and is only
ever put in the Authorization header: never stored, never logged (the call log keeps method,
path, body and answer).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from vsr_core.models import CrowdPlatform
from webapp.platforms.base import PlatformError, Record, RemoteSubmission, credentials

DEFAULT_BASE_URL = "https://api.prolific.com/api/v1"
CallLog = Callable[[str, str, dict[str, Any] | None, int | None, Any, str], None]


def _no_log(*_: Any) -> None:
    return None


class ProlificPlatform:
    name = CrowdPlatform.prolific.value

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,  # for GETs and 429s; a lost POST is never re-sent
        backoff: float = 0.5,
        log: CallLog = _no_log,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if token is None or not base_url:  # the environment fills what the caller left out
            creds = credentials()
            token = creds.prolific_api_token.get_secret_value() if token is None else token
            base_url = base_url or creds.prolific_base_url
        if not token:
            raise PlatformError("PROLIFIC_API_TOKEN is not set")
        self.base_url = base_url or DEFAULT_BASE_URL
        self._client = httpx.Client(
            base_url=self.base_url.rstrip("/"),
            headers={"Authorization": f"Token {token}"},
            timeout=timeout,
        )
        self.retries, self.backoff, self.log, self.sleep = retries, backoff, log, sleep

    def close(self) -> None:
        self._client.close()

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        """One request. A 429 is answered before anything is processed, so it waits
        Retry-After and is sent again, whatever the method; a GET (which changes nothing) is
        also retried after a timeout or a 5xx. Any other request whose answer is lost is
        never re-sent: PlatformError(maybe_sent=True) and the engine reads the state."""
        safe = method == "GET"
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                resp = self._client.request(method, path, json=body, params=params)
            except httpx.ConnectError as exc:  # never reached the platform
                self.log(method, path, body, None, None, type(exc).__name__)
                if safe and not last:
                    self.sleep(self.backoff * 2**attempt)
                    continue
                raise PlatformError(f"Prolific {method} {path}: could not connect") from None
            except httpx.HTTPError as exc:  # a timeout or a connection lost mid-way
                err = "timeout" if isinstance(exc, httpx.TimeoutException) else type(exc).__name__
                self.log(method, path, body, None, None, err)
                if safe and not last:
                    self.sleep(self.backoff * 2**attempt)
                    continue
                raise PlatformError(
                    f"Prolific {method} {path}: {err}, outcome unknown", maybe_sent=not safe
                ) from None
            data = _json(resp)
            self.log(method, path, body, resp.status_code, data, "")
            if resp.status_code == 429 and not last:
                self.sleep(_retry_after(resp, self.backoff * 2**attempt))
                continue
            if resp.status_code >= 500 and safe and not last:
                self.sleep(self.backoff * 2**attempt)
                continue
            if resp.status_code >= 400:
                raise PlatformError(
                    f"Prolific {method} {path}: HTTP {resp.status_code} {_detail(data)}",
                    maybe_sent=resp.status_code >= 500 and not safe,
                )
            return data
        raise PlatformError(f"Prolific {method} {path}: gave up")  # pragma: no cover

    # --- studies ---------------------------------------------------------------------------

    def create_draft(self, settings: dict[str, Any], marker: str) -> str:
        """POST /studies/ with the marker in ``internal_name`` (not shown to participants),
        so that find_draft can tell whether a create whose answer was lost happened."""
        body = {**settings, "internal_name": _marked(settings.get("internal_name", ""), marker)}
        data = self._call("POST", "/studies/", body)
        return str(data["id"])

    def find_draft(self, marker: str) -> str | None:
        """GET /studies/ (drafts only) and the one whose internal_name carries the marker."""
        data = self._call("GET", "/studies/", params={"state": "(UNPUBLISHED)"})
        for study in data.get("results", []):
            if marker in str(study.get("internal_name") or ""):
                return str(study["id"])
        return None

    def _transition(self, study_id: str, action: str) -> None:
        self._call("POST", f"/studies/{study_id}/transition/", {"action": action})

    def publish(self, external_id: str) -> None:
        self._transition(external_id, "PUBLISH")

    def pause(self, external_id: str) -> None:
        self._transition(external_id, "PAUSE")

    def resume(self, external_id: str) -> None:
        self._transition(external_id, "START")  # PUBLISH is for a draft only

    # --- submissions -----------------------------------------------------------------------

    def sync_submissions(self, external_id: str) -> list[RemoteSubmission]:
        data = self._call("GET", f"/studies/{external_id}/submissions/")
        return [
            RemoteSubmission(str(s["id"]), str(s["participant_id"]), str(s["status"]))
            for s in data.get("results", [])
        ]

    def submission_status(self, submission_id: str) -> str:
        return str(self._call("GET", f"/submissions/{submission_id}/")["status"])

    def approve(self, submission_id: str, key: str) -> dict[str, Any]:
        # No idempotency key on transitions; Prolific refuses a second one (the status is no
        # longer AWAITING REVIEW), and the engine reads the status after a lost answer.
        return dict(
            self._call("POST", f"/submissions/{submission_id}/transition/", {"action": "APPROVE"})
        )

    def reject(self, submission_id: str, reason: str, key: str) -> dict[str, Any]:
        body = {
            "action": "REJECT",
            "message": rejection_message(reason),
            "rejection_category": rejection_category(reason),
        }
        return dict(self._call("POST", f"/submissions/{submission_id}/transition/", body))

    def request_return(self, submission_id: str, reason: str, key: str) -> dict[str, Any]:
        body = {"request_return_reasons": [reason]}
        return dict(self._call("POST", f"/submissions/{submission_id}/request-return/", body))

    def bonus(
        self,
        study_external_id: str,
        submission_id: str,
        worker_external_id: str,
        cents: int,
        reason: str,
        key: str,
        record: Record,
    ) -> dict[str, Any]:
        """Set up (POST /submissions/bonus-payments/, one line "<submission_id>,<amount>" in
        the study currency) then pay (POST /bulk-bonus-payments/{id}/pay/). A set-up pays
        nothing; every pay request pays again, so ``record`` writes the set-up id before the
        one pay request is sent, and that request is never repeated."""
        setup = self._call(
            "POST",
            "/submissions/bonus-payments/",
            {
                "study_id": study_external_id,
                "csv_bonuses": f"{submission_id},{cents / 100:.2f}",
            },
        )
        record({"setup": setup})
        paid = self._call("POST", f"/bulk-bonus-payments/{setup['id']}/pay/")
        return {"setup": setup, "pay": paid}

    def bonus_paid(self, submission_id: str, worker_external_id: str, cents: int) -> bool | None:
        return None  # Prolific documents no listing of paid bonuses: unknown (never re-sent)

    def bonuses_listed(self, study_external_id: str) -> dict[str, int] | None:
        return None  # no listing documented (https://docs.prolific.com/api-reference/bonuses)


def _marked(name: str, marker: str) -> str:
    return f"{name} [{marker}]".strip()[:255]


# Prolific wants a rejection message of at least 100 characters and one of its categories.
MIN_REJECTION_MESSAGE = 100


def rejection_message(reason: str) -> str:
    text = (
        f"Your submission was not approved: {reason}. It did not meet the quality checks "
        "described in the study's instructions (questions with known answers, time spent "
        "per item and the number of items completed)."
    )
    return text if len(text) >= MIN_REJECTION_MESSAGE else text.ljust(MIN_REJECTION_MESSAGE)


def rejection_category(reason: str) -> str:
    """The category for our verdicts (webapp.platforms.engine._verdict)."""
    if "too fast" in reason:
        return "TOO_QUICKLY"
    if "gold" in reason:
        return "FAILED_CHECK"
    return "LOW_EFFORT"


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json() if resp.content else {}
    except ValueError:
        return {"text": resp.text[:200]}


def _detail(data: Any) -> str:
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data))
        return " ".join(str(err).split())[:200]
    return " ".join(str(data).split())[:200]


def _retry_after(resp: httpx.Response, default: float) -> float:
    try:
        return min(60.0, max(0.0, float(resp.headers.get("Retry-After", default))))
    except ValueError:
        return default
