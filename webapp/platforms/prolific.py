"""Prolific through its public REST API (https://docs.prolific.com, API v1).

The token comes from PROLIFIC_API_TOKEN and is only ever put in the Authorization header:
never stored, never logged (the call log keeps method, path, body and answer).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import httpx

from webapp.platforms.base import PlatformError, RemoteSubmission

DEFAULT_BASE_URL = "https://api.prolific.com/api/v1"
CallLog = Callable[[str, str, dict[str, Any] | None, int | None, Any, str], None]


def _no_log(*_: Any) -> None:
    return None


class ProlificPlatform:
    name = "prolific"

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
        log: CallLog = _no_log,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        token = token if token is not None else os.environ.get("PROLIFIC_API_TOKEN", "")
        if not token:
            raise PlatformError("PROLIFIC_API_TOKEN is not set")
        self.base_url = (base_url or os.environ.get("PROLIFIC_BASE_URL") or DEFAULT_BASE_URL)
        self._client = httpx.Client(
            base_url=self.base_url.rstrip("/"),
            headers={"Authorization": f"Token {token}"},
            timeout=timeout,
        )
        self.retries, self.backoff, self.log, self.sleep = retries, backoff, log, sleep

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request; 429 waits Retry-After, timeouts and 5xx retry with backoff."""
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                resp = self._client.request(method, path, json=body)
            except httpx.TimeoutException:
                self.log(method, path, body, None, None, "timeout")
                if last:
                    raise PlatformError(f"Prolific {method} {path}: timed out") from None
                self.sleep(self.backoff * 2**attempt)
                continue
            except httpx.HTTPError as exc:
                self.log(method, path, body, None, None, type(exc).__name__)
                raise PlatformError(f"Prolific {method} {path}: {type(exc).__name__}") from None
            data = _json(resp)
            self.log(method, path, body, resp.status_code, data, "")
            if resp.status_code == 429 and not last:
                self.sleep(_retry_after(resp, self.backoff * 2**attempt))
                continue
            if resp.status_code >= 500 and not last:
                self.sleep(self.backoff * 2**attempt)
                continue
            if resp.status_code >= 400:
                raise PlatformError(
                    f"Prolific {method} {path}: HTTP {resp.status_code} {_detail(data)}"
                )
            return data
        raise PlatformError(f"Prolific {method} {path}: gave up")  # pragma: no cover

    # --- studies ---------------------------------------------------------------------------

    def create_draft(self, settings: dict[str, Any]) -> str:
        data = self._call("POST", "/studies/", settings)
        return str(data["id"])

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
        # Prolific has no idempotency key on transitions: the engine re-reads the status
        # before re-sending (see engine.reconcile).
        return dict(self._call(
            "POST", f"/submissions/{submission_id}/transition/", {"action": "APPROVE"}
        ))

    def reject(self, submission_id: str, reason: str, key: str) -> dict[str, Any]:
        body = {"action": "REJECT", "message": rejection_message(reason),
                "rejection_category": rejection_category(reason)}
        return dict(self._call("POST", f"/submissions/{submission_id}/transition/", body))

    def request_return(self, submission_id: str, reason: str, key: str) -> dict[str, Any]:
        body = {"request_return_reasons": [reason]}
        return dict(self._call("POST", f"/submissions/{submission_id}/request-return/", body))

    def bonus(
        self, study_external_id: str, submission_id: str, worker_external_id: str,
        cents: int, reason: str, key: str,
    ) -> dict[str, Any]:
        # Two steps: set up the bonus (amounts in the study currency, pounds/dollars) then pay.
        setup = self._call("POST", "/submissions/bulk-bonus-payments/", {
            "study_id": study_external_id,
            "csv_bonuses": f"{worker_external_id},{cents / 100:.2f}",
        })
        paid = self._call("POST", f"/bulk-bonus-payments/{setup['id']}/pay/")
        return {"setup": setup, "pay": paid}

    def bonus_paid(self, submission_id: str, worker_external_id: str, cents: int) -> bool | None:
        return None  # no documented per-submission bonus listing: unknown (never re-sent)


# Prolific wants a rejection message of at least 100 characters and one of its categories.
MIN_REJECTION_MESSAGE = 100


def rejection_message(reason: str) -> str:
    text = (f"Your submission was not approved: {reason}. It did not meet the quality checks "
            "described in the study's instructions (questions with known answers, time spent "
            "per item and the number of items completed).")
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
